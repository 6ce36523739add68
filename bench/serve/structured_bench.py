#!/usr/bin/env python3
"""What a JSON schema costs a served request: --concurrency (16) streamed chat requests with the
same JSON schema, then the same requests unconstrained, forced to generate exactly as many tokens
as each constrained one did (ignore_eos with that max_tokens), so both sides decode the same
token counts; no request starts from another's prefix-cache blocks. Rounds alternate the two sides (--rounds R), so machine noise weighs on both.
Round 1 uses a schema the server has never seen (its compile is in that round's TTFT); later
rounds hit the compile cache. Then the compile time of a large schema (--large-properties
properties, nested objects, enums and patterns): a request with it (max_tokens 1), minus the same
request again (cached).

  bench/serve/structured_bench.py --base-url http://127.0.0.1:8000 [--rounds 5]

Reports per side: output tokens per second (all requests' tokens / the rounds' wall time) and
mean TTFT, on the client's clock, and the ratios constrained / unconstrained. Standard library
only.
"""
import argparse
import json
import statistics
import threading
import time
import urllib.request

PROMPTS = [
    "Describe a fictional employee as JSON.", "Make up a product for an online shop.",
    "Invent a city and describe it.", "Describe a book you like.", "Create a user profile.",
    "Describe a pet.", "Invent a sports team.", "Describe a recipe.",
]


def schema(tag):
    """A typical extraction schema; `tag` makes it new to the server's cache."""
    return {
        "type": "object",
        "title": f"record_{tag}",
        "properties": {
            "name": {"type": "string", "maxLength": 24},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "email": {"type": "string", "format": "email"},
            "role": {"enum": ["engineer", "manager", "designer", "analyst"]},
            "skills": {"type": "array", "items": {"type": "string", "maxLength": 16},
                       "maxItems": 4},
            "address": {"type": "object", "properties": {
                "city": {"type": "string", "maxLength": 20},
                "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                "required": ["city", "zip"]},
            "active": {"type": "boolean"},
        },
        "required": ["name", "age", "role", "skills", "address", "active"],
    }


def large_schema(n, tag):
    props = {}
    for i in range(n):
        kind = i % 5
        if kind == 0:
            props[f"field_{i}"] = {"type": "string", "maxLength": 32}
        elif kind == 1:
            props[f"field_{i}"] = {"enum": [f"v{i}_{j}" for j in range(20)]}
        elif kind == 2:
            props[f"field_{i}"] = {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{4}$"}
        elif kind == 3:
            props[f"field_{i}"] = {"type": "object", "properties": {
                "a": {"type": "integer", "minimum": 0, "maximum": 999},
                "b": {"type": "array", "items": {"type": "number"}, "maxItems": 8}},
                "required": ["a"]}
        else:
            props[f"field_{i}"] = {"anyOf": [{"type": "boolean"}, {"type": "null"}]}
    return {"type": "object", "title": f"large_{tag}", "properties": props,
            "required": list(props)[: n // 2]}


def post_stream(url, body, result):
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    text, tokens = "", None
    with urllib.request.urlopen(request, timeout=600) as response:
        for line in response:
            if not line.startswith(b"data:") or b"[DONE]" in line:
                continue
            chunk = json.loads(line[5:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            for choice in chunk.get("choices", []):
                piece = choice.get("delta", {}).get("content") or ""
                if piece and "ttft" not in result:
                    result["ttft"] = time.perf_counter() - start
                text += piece
    result.update(e2e=time.perf_counter() - start, text=text, tokens=tokens)


def run_round(base, model, bodies):
    results = [{} for _ in bodies]
    threads = [threading.Thread(target=post_stream,
                                args=(base + "/v1/chat/completions", b, r))
               for b, r in zip(bodies, results)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    return wall, results


def body(model, prompt, max_tokens, **extra):
    return {"model": model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens, "temperature": 0.0, "stream": True,
            "stream_options": {"include_usage": True}, **extra}


def metric(base, name):
    """The value of `name` in /metrics (0 when absent)."""
    with urllib.request.urlopen(base + "/metrics") as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


MASK_METRICS = ["pagoda:structured_output_masks_total",
                "pagoda:structured_output_mask_seconds_total",
                "pagoda:structured_output_mask_wait_seconds_total"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base-url", default="http://127.0.0.1:8000")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--max-tokens", type=int, default=160)
    p.add_argument("--large-properties", type=int, default=400)
    args = p.parse_args()
    base = args.base_url.rstrip("/")
    with urllib.request.urlopen(base + "/v1/models") as r:
        model = json.load(r)["data"][0]["id"]
    tag = str(time.time_ns())
    sides = {"schema": {"tokens": 0, "wall": 0.0, "ttft": [], "round_ttft": []},
             "plain": {"tokens": 0, "wall": 0.0, "ttft": [], "round_ttft": []}}
    masks_before = [metric(base, m) for m in MASK_METRICS]
    for rnd in range(args.rounds):
        prompts = [PROMPTS[i % len(PROMPTS)] + f" (#{rnd}.{i})" for i in range(args.concurrency)]
        fmt = {"type": "json_schema", "json_schema": {"name": "record",
                                                      "schema": schema(tag)}}
        # Each request its own cache salt: the plain side runs the schema side's prompts, which
        # must not start from the blocks the schema side left in the prefix cache.
        wall, results = run_round(base, model, [
            body(model, q, args.max_tokens, response_format=fmt, cache_salt=f"s{tag}{rnd}.{i}")
            for i, q in enumerate(prompts)])
        counts = [r["tokens"] for r in results]
        # The same prompts unconstrained, each generating exactly as many tokens.
        plain_wall, plain = run_round(base, model, [
            body(model, q, n, ignore_eos=True, cache_salt=f"p{tag}{rnd}.{i}")
            for i, (q, n) in enumerate(zip(prompts, counts))])
        for name, w, rs in (("schema", wall, results), ("plain", plain_wall, plain)):
            s = sides[name]
            s["tokens"] += sum(r["tokens"] for r in rs)
            s["wall"] += w
            s["ttft"] += [r["ttft"] for r in rs]
            s["round_ttft"].append(statistics.mean(r["ttft"] for r in rs))
        print(f"round {rnd + 1}: mean TTFT schema {1000 * sides['schema']['round_ttft'][-1]:.1f}"
              f" ms, plain {1000 * sides['plain']['round_ttft'][-1]:.1f} ms; tok/s schema "
              f"{sum(counts) / wall:.1f}, plain {sum(counts) / plain_wall:.1f}")
    masks = [metric(base, m) - b for m, b in zip(MASK_METRICS, masks_before)]
    for name, s in sides.items():
        s["tok_per_s"] = s["tokens"] / s["wall"]
        s["mean_ttft"] = statistics.mean(s["ttft"])
        s["cached_ttft"] = statistics.mean(s["round_ttft"][1:] or s["round_ttft"])
        print(f"{name:6s}: {s['tokens']} tokens in {s['wall']:.2f} s = {s['tok_per_s']:.1f} tok/s,"
              f" mean TTFT {1000 * s['mean_ttft']:.1f} ms (rounds 2+: "
              f"{1000 * s['cached_ttft']:.1f} ms)")
    sch, pl = sides["schema"], sides["plain"]
    print(f"throughput ratio schema/plain: {sch['tok_per_s'] / pl['tok_per_s']:.3f}")
    print(f"mean TTFT ratio schema/plain: {sch['mean_ttft'] / pl['mean_ttft']:.3f} (round 1 "
          f"compiles the new schema: {1000 * sch['round_ttft'][0]:.1f} vs "
          f"{1000 * pl['round_ttft'][0]:.1f} ms); rounds 2+ (cached): "
          f"{sch['cached_ttft'] / pl['cached_ttft']:.3f}")
    if masks[0] > 0:
        print(f"masks: {masks[0]:.0f} filled, {1e6 * masks[1] / masks[0]:.0f} us each beside the "
              f"forward pass; steps waited {1000 * masks[2]:.1f} ms for them in all")

    big = large_schema(args.large_properties, tag)
    fmt = {"type": "json_schema", "json_schema": {"name": "large", "schema": big}}
    times = []
    for _ in range(2):
        _, results = run_round(base, model, [body(model, PROMPTS[0], 1, response_format=fmt)])
        times.append(results[0]["e2e"])
    print(f"large schema ({args.large_properties} properties, {len(json.dumps(big))} bytes): "
          f"first request {1000 * times[0]:.0f} ms, cached {1000 * times[1]:.0f} ms, "
          f"compile ~{1000 * (times[0] - times[1]):.0f} ms")


if __name__ == "__main__":
    main()
