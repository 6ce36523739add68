#!/usr/bin/env python3
"""Does a short request wait behind another's long prefill? Sends a long prompt (random token
ids, --long-len tokens, 8 out), then after --delay seconds a short one (--short-len tokens, 1 out),
and reports each one's time to first token and end-to-end latency, on the client's clock.

  bench/serve/prefill_stall.py --base-url http://127.0.0.1:8000 --long-len 2000

Standard library only; /v1/completions with integer-array prompts (as serve_bench.py)."""
import argparse
import json
import random
import threading
import time
import urllib.request


def timed_completion(url, model, prompt, max_tokens, result):
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens,
                       "temperature": 0, "ignore_eos": True, "stream": True}).encode()
    request = urllib.request.Request(url + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=600) as response:
        for line in response:
            if line.startswith(b"data:") and b"[DONE]" not in line and "ttft" not in result:
                result["ttft"] = time.perf_counter() - start
    result["e2e"] = time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", default="http://127.0.0.1:8000")
    p.add_argument("--long-len", type=int, default=2000)
    p.add_argument("--short-len", type=int, default=8)
    p.add_argument("--delay", type=float, default=0.3)
    args = p.parse_args()
    with urllib.request.urlopen(args.base_url + "/v1/models", timeout=30) as r:
        model = json.load(r)["data"][0]["id"]
    rng = random.Random(0)
    long_prompt = [rng.randrange(1000, 20000) for _ in range(args.long_len)]
    short_prompt = [rng.randrange(1000, 20000) for _ in range(args.short_len)]
    results = {"long": {}, "short": {}}
    long_thread = threading.Thread(target=timed_completion,
                                   args=(args.base_url, model, long_prompt, 8, results["long"]))
    long_thread.start()
    time.sleep(args.delay)
    timed_completion(args.base_url, model, short_prompt, 1, results["short"])
    long_thread.join()
    for name, r in results.items():
        print(f"{name:5s} ttft {r['ttft']:7.2f} s  e2e {r['e2e']:7.2f} s")


if __name__ == "__main__":
    main()
