#!/usr/bin/env python3
"""Load benchmark of `pagoda serve`'s HTTP layer (not a test; results go to docs/perf/http.md).

It launches the server, opens CONNECTIONS keep-alive connections that each probe /health now and
then, and meanwhile runs STREAMS concurrent streamed completions. It reports connections held,
errors, /health latency under that load, streamed tokens/s, and the HTTP layer's own CPU time per
streamed token: the CPU time of the server's io threads (named "pagoda-http", read from
/proc/PID/task/*/stat) divided by the tokens streamed. Those threads do everything between the
socket and the engine (parsing, routing, validation, SSE encoding, writes); the engine and model
threads are not counted.

  .venv/bin/python bench/http/load.py [--bin build/pagoda] [--connections 2000] [--streams 200]
"""
import argparse
import asyncio
import json
import os
import random
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def launch(binary, extra):
    log = tempfile.NamedTemporaryFile(prefix="pagoda-bench-", suffix=".log", delete=False)
    proc = subprocess.Popen([binary, "serve", "--port", "0", *extra], stdout=log,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        match = re.search(r"listening on http://[^:]+:(\d+)", Path(log.name).read_text())
        if match:
            return proc, int(match.group(1)), log.name
        if proc.poll() is not None:
            sys.exit(Path(log.name).read_text())
        time.sleep(0.05)
    proc.kill()
    sys.exit("the server did not start")


def thread_cpu_seconds(pid, name):
    """CPU seconds (user + system) of the threads of `pid` called `name`."""
    ticks = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        stat = (task / "stat").read_text()
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        if comm == name:
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Http:
    """A minimal HTTP/1.1 client on one keep-alive connection (Content-Length bodies)."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port):
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def get(self, path):
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
        await self.reader.readexactly(length)
        return status


async def health_probes(conn, stop, latencies, errors, interval):
    await asyncio.sleep(random.uniform(0, interval))
    while not stop.is_set():
        started = time.perf_counter()
        try:
            status = await conn.get("/health")
        except (OSError, asyncio.IncompleteReadError) as e:
            errors.append(f"health: {e!r}")
            return
        if status != 200:
            errors.append(f"health: {status}")
        latencies.append(time.perf_counter() - started)
        await asyncio.sleep(interval * random.uniform(0.5, 1.5))


async def stream(port, index, max_tokens, errors, counts):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps({"model": "bench", "prompt": f"Story {index}: once upon a time",
                       "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0,
                       "stream": True, "stream_options": {"include_usage": True}}).encode()
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json"
                 b"\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    data = b""
    try:
        while b"data: [DONE]" not in data:
            chunk = await reader.read(65536)
            if not chunk:
                errors.append(f"stream {index}: closed early")
                return
            data += chunk
    finally:
        writer.close()
    if not data.startswith(b"HTTP/1.1 200"):
        errors.append(f"stream {index}: {data[:80]!r}")
        return
    usage = re.findall(rb'"completion_tokens":(\d+)', data)
    counts.append(int(usage[-1]) if usage else 0)


async def run(args, port, pid):
    conns = []
    errors, latencies, counts = [], [], []
    started = time.monotonic()
    for batch in range(0, args.connections, 200):
        conns += await asyncio.gather(*(Http.open(port) for _ in
                                        range(min(200, args.connections - batch))))
    for conn in conns:  # each is served once, so each is a live HTTP connection
        assert await conn.get("/health") == 200
    print(f"{len(conns)} keep-alive connections open in {time.monotonic() - started:.1f}s",
          flush=True)

    stop = asyncio.Event()
    probes = [asyncio.create_task(health_probes(c, stop, latencies, errors, args.probe_interval))
              for c in conns]
    http_cpu0, proc_cpu0, t0 = thread_cpu_seconds(pid, "pagoda-http"), process_cpu_seconds(pid), \
        time.monotonic()
    await asyncio.gather(*(stream(port, i, args.max_tokens, errors, counts)
                           for i in range(args.streams)))
    elapsed = time.monotonic() - t0
    http_cpu = thread_cpu_seconds(pid, "pagoda-http") - http_cpu0
    proc_cpu = process_cpu_seconds(pid) - proc_cpu0
    stop.set()
    await asyncio.gather(*probes)
    held = sum([await c.get("/health") == 200 for c in conns])
    tokens = sum(counts)
    latencies.sort()
    q = lambda p: latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000 \
        if latencies else float("nan")
    report = {
        "connections_held": held, "connections": args.connections, "streams": args.streams,
        "streams_completed": len(counts), "errors": len(errors),
        "health_probes": len(latencies), "health_p50_ms": round(q(0.50), 2),
        "health_p99_ms": round(q(0.99), 2), "streamed_tokens": tokens,
        "stream_seconds": round(elapsed, 2), "streamed_tokens_per_s": round(tokens / elapsed, 1),
        "http_thread_cpu_s": round(http_cpu, 3), "server_cpu_s": round(proc_cpu, 2),
        "http_cpu_us_per_token": round(http_cpu / max(tokens, 1) * 1e6, 1),
    }
    for e in errors[:10]:
        print("error:", e)
    return report


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=str(ROOT / "build" / "pagoda"))
    parser.add_argument("--connections", type=int, default=2000)
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--probe-interval", type=float, default=10.0,
                        help="mean seconds between /health probes on each idle connection")
    parser.add_argument("server_flags", nargs="*", help="extra flags for pagoda serve")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    proc, port, log = launch(args.bin, ["--served-model-name", "bench", "--max-model-len", "512",
                                        "--max-num-seqs", str(max(args.streams, 1)),
                                        "--disable-log-requests", *args.server_flags])
    try:
        import urllib.request
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5)
                break
            except Exception:
                time.sleep(0.1)
        report = asyncio.run(run(args, port, proc.pid))
        print(json.dumps(report, indent=2))
    finally:
        proc.send_signal(signal.SIGTERM)
        print("server exit code:", proc.wait(timeout=60))


if __name__ == "__main__":
    main()
