#!/usr/bin/env python3
"""Serving benchmark: drives any OpenAI-compatible server with streamed requests and reports
TTFT, TPOT, ITL and end-to-end latency (mean, median, p90, p99) plus request and token throughput.

  bench/serve/serve_bench.py --base-url http://127.0.0.1:8000 --num-prompts 64 --concurrency 16 \
      --input-len 128 --output-len 64 --ignore-eos [--request-rate 4] [--result-json out.json]

Load: at most --concurrency requests in flight; requests start at once (--request-rate inf) or at
Poisson arrivals of that rate (exponential gaps, seeded). Prompts: --input-len random token ids
(sent as an integer-array `prompt`, which /v1/completions accepts on Pagoda, vLLM and
llama-server, so both servers see exactly the same tokens), or --dataset FILE.jsonl whose lines
hold {"prompt": str | [int], "output_len"?: int}. --backend openai posts /v1/completions,
openai-chat posts /v1/chat/completions (text prompts only).

Measured per request, on the client's clock: TTFT (request sent -> first chunk with text), ITL
(gaps between later chunks with text; one chunk per token on Pagoda and llama-server), TPOT
((latency - TTFT) / (output tokens - 1)), E2EL (request sent -> end of stream). Output tokens come
from the final usage (stream_options.include_usage), else from the count of text chunks.
Against Pagoda it also reads /metrics before and after the run and reports the engine's steps: how
many, and the mean step's decode rows and prompt-chunk tokens (pagoda:scheduled_*_tokens_total),
which show how a step budget shared each step; on CUDA also the GPU's busy and idle time per step
(pagoda:device_*_seconds_total, from the server's CUDA events).

The client is stdlib-only asyncio over raw HTTP/1.1 (one connection per request), so it runs
anywhere the server does. Its own cost is reported: CPU seconds of this process per streamed
token (`client_cpu_us_per_token`); on a shared 2-core machine that CPU is taken from the server.
"""
import argparse
import asyncio
import json
import math
import random
import sys
import time
import urllib.parse
from dataclasses import dataclass, field


@dataclass
class RequestResult:
    ok: bool = False
    error: str = ""
    prompt_len: int = 0
    output_len: int = 0
    ttft: float = 0.0
    latency: float = 0.0
    itl: list = field(default_factory=list)


# ---- HTTP/1.1 + SSE over asyncio streams -------------------------------------------------------

async def read_headers(reader):
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionError("connection closed before the status line")
    parts = status_line.decode("latin-1").split(" ", 2)
    status = int(parts[1])
    headers = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


async def body_pieces(reader, headers):
    """Yields the body as it arrives: chunked, Content-Length or read-to-close."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = await reader.readline()
            if not size_line:
                return
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                await reader.readline()
                return
            data = await reader.readexactly(size)
            await reader.readexactly(2)
            yield data
    elif "content-length" in headers:
        remaining = int(headers["content-length"])
        while remaining > 0:
            data = await reader.read(min(remaining, 65536))
            if not data:
                return
            remaining -= len(data)
            yield data
    else:
        while data := await reader.read(65536):
            yield data


async def post_stream(url, payload, on_event, timeout):
    """POSTs `payload` as JSON and calls on_event(data_str) for every SSE `data:` field.
    Returns the HTTP status and, for a non-200 answer, the body text."""
    parsed = urllib.parse.urlsplit(url)
    host, port = parsed.hostname, parsed.port or 80
    body = json.dumps(payload).encode()
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    try:
        writer.write((f"POST {parsed.path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                      "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
                      f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body)
        await writer.drain()
        status, headers = await asyncio.wait_for(read_headers(reader), timeout)
        if status != 200:
            text = b"".join([p async for p in body_pieces(reader, headers)])
            return status, text.decode(errors="replace")
        pending = b""
        async for piece in body_pieces(reader, headers):
            pending += piece
            # Events end with a blank line; accept \r\n line ends as well.
            pending = pending.replace(b"\r\n", b"\n")
            while (end := pending.find(b"\n\n")) >= 0:
                event, pending = pending[:end], pending[end + 2:]
                for line in event.split(b"\n"):
                    if line.startswith(b"data:"):
                        on_event(line[5:].strip().decode())
        return status, ""
    finally:
        writer.close()


# ---- one request ---------------------------------------------------------------------------

def request_payload(args, model, prompt, output_len):
    payload = {"model": model, "max_tokens": output_len, "stream": True,
               "stream_options": {"include_usage": True}, "temperature": args.temperature}
    if args.ignore_eos:
        payload["ignore_eos"] = True
    if args.backend == "openai-chat":
        payload["messages"] = [{"role": "user", "content": prompt}]
    else:
        payload["prompt"] = prompt
    return payload


def chunk_text(chunk):
    """The text a streamed chunk carries (completions `text`, chat `delta.content`)."""
    out = ""
    for choice in chunk.get("choices") or []:
        out += choice.get("text") or (choice.get("delta") or {}).get("content") or ""
    return out


async def run_request(args, url, model, prompt, prompt_len, output_len):
    result = RequestResult(prompt_len=prompt_len)
    state = {"last": None, "chunks": 0, "usage": None, "error": ""}
    start = time.perf_counter()

    def on_event(data):
        if data == "[DONE]":
            return
        now = time.perf_counter()
        chunk = json.loads(data)
        if "error" in chunk:
            state["error"] = json.dumps(chunk["error"])
        if chunk.get("usage"):
            state["usage"] = chunk["usage"]
        # Only chunks with text are token arrivals: role-only, usage-only and empty deltas (text
        # held back, e.g. half a UTF-8 character) are not.
        if chunk_text(chunk):
            if state["last"] is None:
                result.ttft = now - start
            else:
                result.itl.append(now - state["last"])
            state["last"] = now
            state["chunks"] += 1

    try:
        status, text = await asyncio.wait_for(
            post_stream(url, request_payload(args, model, prompt, output_len), on_event,
                        args.timeout), args.timeout)
        result.latency = time.perf_counter() - start
        if status != 200:
            result.error = f"HTTP {status}: {text[:200]}"
        elif state["error"]:
            result.error = state["error"]
        elif state["last"] is None:
            result.error = "no tokens streamed"
        else:
            usage = state["usage"] or {}
            result.output_len = int(usage.get("completion_tokens") or state["chunks"])
            if usage.get("prompt_tokens"):
                result.prompt_len = int(usage["prompt_tokens"])
            result.ok = True
    except (OSError, asyncio.TimeoutError, ValueError) as e:
        result.latency = time.perf_counter() - start
        result.error = f"{type(e).__name__}: {e}"
    return result


# ---- prompts ------------------------------------------------------------------------------------

def make_prompts(args, rng):
    """[(prompt, prompt_len, output_len)] for --num-prompts requests."""
    if args.dataset:
        rows = []
        with open(args.dataset) as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    prompt = row["prompt"]
                    plen = len(prompt) if isinstance(prompt, list) else 0
                    rows.append((prompt, plen, int(row.get("output_len", args.output_len))))
        if not rows:
            sys.exit(f"serve_bench: {args.dataset} holds no prompts")
        return [rows[i % len(rows)] for i in range(args.num_prompts)]
    if args.backend == "openai-chat":
        sys.exit("serve_bench: random prompts are token ids; use --dataset with openai-chat")
    # Ids from a middle band of the vocabulary: ordinary text tokens, no specials; each prompt
    # differs from its first token so no server can reuse a cached prefix.
    lo, hi = args.token_id_range
    return [([rng.randrange(lo, hi) for _ in range(args.input_len)], args.input_len,
             args.output_len) for _ in range(args.num_prompts)]


# ---- statistics and report ----------------------------------------------------------------------

def percentile(values, q):
    if not values:
        return float("nan")
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(values_s):
    ms = [v * 1000.0 for v in values_s]
    if not ms:
        return {k: float("nan") for k in ("mean", "median", "p90", "p99")}
    return {"mean": sum(ms) / len(ms), "median": percentile(ms, 50), "p90": percentile(ms, 90),
            "p99": percentile(ms, 99)}


def build_report(args, model, results, duration, client_cpu):
    ok = [r for r in results if r.ok]
    out_tokens = sum(r.output_len for r in ok)
    in_tokens = sum(r.prompt_len for r in ok)
    tpot = [(r.latency - r.ttft) / (r.output_len - 1) for r in ok if r.output_len > 1]
    return {
        "base_url": args.base_url, "backend": args.backend, "model": model,
        "num_prompts": len(results), "concurrency": args.concurrency,
        "request_rate": args.request_rate, "input_len": args.input_len,
        "output_len": args.output_len, "ignore_eos": args.ignore_eos,
        "completed": len(ok), "failed": len(results) - len(ok),
        "errors": sorted({r.error for r in results if not r.ok})[:5],
        "duration_s": duration,
        "total_input_tokens": in_tokens, "total_output_tokens": out_tokens,
        "request_throughput": len(ok) / duration if duration > 0 else 0.0,
        "output_throughput": out_tokens / duration if duration > 0 else 0.0,
        "total_token_throughput": (in_tokens + out_tokens) / duration if duration > 0 else 0.0,
        "ttft_ms": summarize([r.ttft for r in ok]),
        "tpot_ms": summarize(tpot),
        "itl_ms": summarize([g for r in ok for g in r.itl]),
        "e2el_ms": summarize([r.latency for r in ok]),
        "client_cpu_s": client_cpu,
        "client_cpu_us_per_token": client_cpu / out_tokens * 1e6 if out_tokens else float("nan"),
    }


def print_table(report, file=sys.stdout):
    w = 50
    print("=" * w + "\n" + " Serving Benchmark Result ".center(w, "=") + "\n" + "=" * w, file=file)
    rows = [("Successful requests", report["completed"]), ("Failed requests", report["failed"]),
            ("Concurrency", report["concurrency"]),
            ("Request rate (req/s)", report["request_rate"]),
            ("Benchmark duration (s)", f"{report['duration_s']:.2f}"),
            ("Total input tokens", report["total_input_tokens"]),
            ("Total output tokens", report["total_output_tokens"]),
            ("Request throughput (req/s)", f"{report['request_throughput']:.2f}"),
            ("Output token throughput (tok/s)", f"{report['output_throughput']:.2f}"),
            ("Total token throughput (tok/s)", f"{report['total_token_throughput']:.2f}")]
    for name, value in rows:
        print(f"{name:<36}{value:>14}", file=file)
    for key, title in (("ttft_ms", "Time to First Token"), ("tpot_ms", "Time per Output Token"),
                       ("itl_ms", "Inter-token Latency"), ("e2el_ms", "End-to-end Latency")):
        print(f" {title} ".center(w, "-"), file=file)
        short = key.split("_")[0].upper()
        for stat in ("mean", "median", "p90", "p99"):
            name = stat.capitalize() if stat in ("mean", "median") else stat.upper()
            label = f"{name} {short} (ms)"
            print(f"{label:<36}{report[key][stat]:>14.2f}", file=file)
    print(f"{'Client CPU per output token (us)':<36}{report['client_cpu_us_per_token']:>14.1f}",
          file=file)
    steps = report.get("engine_steps")
    if steps:
        print(" Engine steps (server's /metrics) ".center(w, "-"), file=file)
        print(f"{'Steps':<36}{steps['steps']:>14}", file=file)
        print(f"{'Decode rows per step':<36}{steps['decode_tokens_per_step']:>14.2f}", file=file)
        print(f"{'Prompt tokens per step':<36}{steps['prefill_tokens_per_step']:>14.2f}",
              file=file)
    device = report.get("device")
    if device:
        print(" GPU steps (server's CUDA events) ".center(w, "-"), file=file)
        print(f"{'Steps':<36}{device['steps']:>14}", file=file)
        print(f"{'Busy per step (ms)':<36}{device['busy_ms_per_step']:>14.3f}", file=file)
        print(f"{'Idle per step (ms)':<36}{device['idle_ms_per_step']:>14.3f}", file=file)
        print(f"{'Idle fraction':<36}{device['idle_fraction']:>14.4f}", file=file)
    if report["errors"]:
        print("Errors: " + "; ".join(report["errors"]), file=file)
    print("=" * w, file=file)


# ---- driver -------------------------------------------------------------------------------------

async def fetch_model(base_url, timeout):
    parsed = urllib.parse.urlsplit(base_url)
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(parsed.hostname, parsed.port or 80), timeout)
    try:
        writer.write(f"GET /v1/models HTTP/1.1\r\nHost: {parsed.hostname}\r\n"
                     "Connection: close\r\n\r\n".encode())
        await writer.drain()
        status, headers = await read_headers(reader)
        body = b"".join([p async for p in body_pieces(reader, headers)])
        if status != 200:
            raise SystemExit(f"serve_bench: GET /v1/models answered {status}: {body[:200]!r}")
        return json.loads(body)["data"][0]["id"]
    finally:
        writer.close()


DEVICE_METRICS = ("pagoda:device_steps_total", "pagoda:device_busy_seconds_total",
                  "pagoda:device_idle_seconds_total")
STEP_METRICS = ("pagoda:engine_steps_total", "pagoda:scheduled_decode_tokens_total",
                "pagoda:scheduled_prefill_tokens_total")


async def fetch_engine_metrics(base_url, timeout):
    """Pagoda's step counters from /metrics: {name: value} for those of DEVICE_METRICS and
    STEP_METRICS it has (None where the server has no /metrics, e.g. llama-server)."""
    parsed = urllib.parse.urlsplit(base_url)
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(parsed.hostname, parsed.port or 80), timeout)
    except OSError:
        return None
    try:
        writer.write(f"GET /metrics HTTP/1.1\r\nHost: {parsed.hostname}\r\n"
                     "Connection: close\r\n\r\n".encode())
        await writer.drain()
        status, headers = await read_headers(reader)
        body = b"".join([p async for p in body_pieces(reader, headers)]).decode(errors="replace")
    finally:
        writer.close()
    if status != 200:
        return None
    values = {}
    for line in body.splitlines():
        name, _, rest = line.partition("{")
        if name in DEVICE_METRICS or name in STEP_METRICS:
            values[name] = float(rest.rsplit(" ", 1)[-1])
    return values


def device_report(before, after):
    """GPU busy / idle over the measured run, from the counter deltas (Pagoda on CUDA only)."""
    if not before or not after or not all(m in before and m in after for m in DEVICE_METRICS):
        return None
    steps = after[DEVICE_METRICS[0]] - before[DEVICE_METRICS[0]]
    busy = after[DEVICE_METRICS[1]] - before[DEVICE_METRICS[1]]
    idle = after[DEVICE_METRICS[2]] - before[DEVICE_METRICS[2]]
    if steps <= 0:
        return None
    return {"steps": int(steps), "busy_ms_per_step": busy / steps * 1e3,
            "idle_ms_per_step": idle / steps * 1e3,
            "idle_fraction": idle / (busy + idle) if busy + idle > 0 else 0.0}


def step_report(before, after):
    """The measured run's engine steps and their mean mix of decode rows and prompt tokens."""
    if not before or not after or not all(m in before and m in after for m in STEP_METRICS):
        return None
    steps, decode, prefill = (after[m] - before[m] for m in STEP_METRICS)
    if steps <= 0:
        return None
    return {"steps": int(steps), "decode_tokens_per_step": decode / steps,
            "prefill_tokens_per_step": prefill / steps}


async def run_batch(args, url, model, prompts, rng, progress):
    sem = asyncio.Semaphore(args.concurrency)
    results = [None] * len(prompts)
    state = {"done": 0, "in_flight": 0, "tokens": 0}

    async def one(i, prompt, plen, olen):
        async with sem:
            state["in_flight"] += 1
            results[i] = await run_request(args, url, model, prompt, plen, olen)
            state["in_flight"] -= 1
            state["done"] += 1
            state["tokens"] += results[i].output_len

    start = time.perf_counter()
    reporter = None
    if progress:
        reporter = asyncio.create_task(report_progress(state, len(prompts), start))
    tasks = []
    for i, (prompt, plen, olen) in enumerate(prompts):
        tasks.append(asyncio.create_task(one(i, prompt, plen, olen)))
        if args.request_rate != float("inf") and i + 1 < len(prompts):
            await asyncio.sleep(rng.expovariate(args.request_rate))
    await asyncio.gather(*tasks)
    duration = time.perf_counter() - start
    if reporter:
        reporter.cancel()
        print_progress(state, len(prompts), start, final=True)
    return results, duration


def print_progress(state, total, start, final=False):
    elapsed = time.perf_counter() - start
    line = (f"serve_bench: {state['done']}/{total} done, {state['in_flight']} in flight, "
            f"{state['tokens']} tokens, {elapsed:.1f} s")
    if sys.stderr.isatty():
        print("\r" + line, end="\n" if final else "", file=sys.stderr, flush=True)
    else:
        print(line, file=sys.stderr, flush=True)


async def report_progress(state, total, start):
    interval = 0.5 if sys.stderr.isatty() else 5.0
    while True:
        await asyncio.sleep(interval)
        print_progress(state, total, start)


async def main_async(args):
    rng = random.Random(args.seed)
    model = args.model or await fetch_model(args.base_url, args.timeout)
    path = "/v1/chat/completions" if args.backend == "openai-chat" else "/v1/completions"
    url = args.base_url.rstrip("/") + path
    prompts = make_prompts(args, rng)
    if args.warmup:
        warm_rng = random.Random(args.seed + 1)
        warm = make_prompts(argparse.Namespace(**{**vars(args), "num_prompts": args.warmup}),
                            warm_rng)
        saved, args.request_rate = args.request_rate, float("inf")
        await run_batch(args, url, model, warm, warm_rng, progress=False)
        args.request_rate = saved
    cpu0 = time.process_time()
    before = await fetch_engine_metrics(args.base_url, args.timeout)
    results, duration = await run_batch(args, url, model, prompts, rng, not args.quiet)
    after = await fetch_engine_metrics(args.base_url, args.timeout)
    report = build_report(args, model, results, duration, time.process_time() - cpu0)
    report["device"] = device_report(before, after)
    report["engine_steps"] = step_report(before, after)
    return report


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", default="http://127.0.0.1:8000")
    p.add_argument("--backend", choices=("openai", "openai-chat"), default="openai",
                   help="openai: /v1/completions; openai-chat: /v1/chat/completions")
    p.add_argument("--model", help="model name to send (default: the first of /v1/models)")
    p.add_argument("--num-prompts", type=int, default=64)
    p.add_argument("--concurrency", type=int, default=1, help="most requests in flight")
    p.add_argument("--request-rate", type=float, default=float("inf"),
                   help="Poisson arrivals per second (default inf: all at once)")
    p.add_argument("--input-len", type=int, default=128, help="random prompt length in tokens")
    p.add_argument("--output-len", type=int, default=64, help="max_tokens per request")
    p.add_argument("--token-id-range", type=int, nargs=2, default=(1000, 20000),
                   metavar=("LO", "HI"), help="random prompt token ids are drawn from [LO, HI)")
    p.add_argument("--dataset", help="JSONL: {\"prompt\": str | [int], \"output_len\"?: int}")
    p.add_argument("--ignore-eos", action="store_true", help="send ignore_eos: fixed lengths")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--warmup", type=int, default=0, help="unmeasured requests sent first")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    p.add_argument("--result-json", help="write the report as JSON to this file")
    p.add_argument("--json", action="store_true", help="print the JSON report instead of a table")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    args = p.parse_args(argv)
    if args.concurrency < 1 or args.num_prompts < 1 or args.output_len < 1:
        p.error("--concurrency, --num-prompts and --output-len must be >= 1")
    if args.request_rate <= 0:
        p.error("--request-rate must be > 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    report = asyncio.run(main_async(args))
    if args.result_json:
        with open(args.result_json, "w") as f:
            json.dump(report, f, indent=2)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 0 if report["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
