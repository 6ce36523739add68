"""Shared fixtures for the end-to-end tests: the real `pagoda` binary and the real default model."""
import asyncio
import functools
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def pagoda_bin() -> Path:
    path = Path(os.environ.get("PAGODA_BIN", ROOT / "build" / "pagoda"))
    if not path.exists():
        pytest.fail(f"{path} does not exist: build first (scripts/build.sh) or set PAGODA_BIN")
    return path


@pytest.fixture(scope="session")
def default_model() -> Path:
    if not DEFAULT_MODEL.exists():
        pytest.fail(f"{DEFAULT_MODEL} is missing: run scripts/setup.sh")
    return DEFAULT_MODEL


@pytest.fixture(scope="session")
def run_pagoda(pagoda_bin):
    """Runs `pagoda ARGS...` and returns the CompletedProcess (text mode, never raises on rc)."""
    def run(*args, timeout=60):
        return subprocess.run([str(pagoda_bin), *map(str, args)], capture_output=True, text=True,
                              timeout=timeout)
    return run


@pytest.fixture(scope="session")
def run_pagoda_json(run_pagoda):
    """Runs pagoda, asserts success and parses stdout as JSON."""
    def run(*args):
        proc = run_pagoda(*args)
        assert proc.returncode == 0, f"pagoda {' '.join(map(str, args))} failed:\n{proc.stderr}"
        return json.loads(proc.stdout)
    return run


# ---- `pagoda serve` -------------------------------------------------------------------------

import re
import signal
import socket
import tempfile
import time
import urllib.error
import urllib.request


class PagodaServer:
    """A running `pagoda serve` on a free port; its log goes to a temporary file."""

    def __init__(self, proc, port, log_path):
        self.proc = proc
        self.port = port
        self.log_path = log_path
        self.base_url = f"http://127.0.0.1:{port}"

    def url(self, path):
        return self.base_url + path

    def log(self):
        return Path(self.log_path).read_text(errors="replace")

    def get(self, path, timeout=30):
        """(status, headers, body bytes) of a GET, error statuses included."""
        try:
            with urllib.request.urlopen(self.url(path), timeout=timeout) as resp:
                return resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def post_json(self, path, body, timeout=60, headers=None):
        """(status, parsed JSON body) of a POST with a JSON body."""
        data = json.dumps(body).encode()
        req = urllib.request.Request(self.url(path), data=data, method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def metric(self, name):
        """The value of the first sample of metric `name` in /metrics."""
        status, _, body = self.get("/metrics")
        assert status == 200
        for line in body.decode().splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError(f"{name} is not in /metrics")

    def samples(self):
        """Every sample in /metrics, as {(name, frozenset of label pairs): value}."""
        status, _, body = self.get("/metrics")
        assert status == 200
        samples = {}
        for line in body.decode().splitlines():
            if line and not line.startswith("#"):
                series, value = line.rsplit(" ", 1)
                name, _, labels = series.partition("{")
                samples[(name, frozenset(re.findall(r'(\w+)="([^"]*)"', labels)))] = float(value)
        return samples

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Sends `sig` and returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"pagoda serve did not exit within {timeout}s after {sig!r}")


def launch_server(pagoda_bin, *args, wait_ready=True, timeout=60, env=None):
    """Starts `pagoda serve --port 0 ARGS...` (in environment `env`, default this one's), reads the
    bound port from its log, and (unless wait_ready is false) waits for /health to answer 200."""
    log = tempfile.NamedTemporaryFile(prefix="pagoda-serve-", suffix=".log", delete=False)
    args = [str(a) for a in args]
    # Each server gets its own gRPC port (the default 50051 would collide between servers),
    # when the binary was built with gRPC.
    if "--grpc-port" not in args and serve_has_grpc(pagoda_bin):
        args += ["--grpc-port", str(free_port())]
    grpc_port = int(args[args.index("--grpc-port") + 1]) if "--grpc-port" in args else 0
    proc = subprocess.Popen([str(pagoda_bin), "serve", "--port", "0", *args],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + timeout
    port = None
    while port is None:
        text = Path(log.name).read_text(errors="replace")
        match = re.search(r"listening on http://[^:]+:(\d+)", text)
        if match:
            port = int(match.group(1))
        elif proc.poll() is not None:
            raise AssertionError(f"pagoda serve exited with {proc.returncode}:\n{text}")
        elif time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"pagoda serve did not start listening:\n{text}")
        else:
            time.sleep(0.02)
    server = PagodaServer(proc, port, log.name)
    server.grpc_target = f"127.0.0.1:{grpc_port}" if grpc_port else None
    while wait_ready:
        status, _, _ = server.get("/health", timeout=5)
        if status == 200:
            break
        if proc.poll() is not None or time.monotonic() > deadline:
            server.stop(signal.SIGKILL)
            raise AssertionError(f"pagoda serve never became healthy:\n{server.log()}")
        time.sleep(0.05)
    return server


@pytest.fixture(scope="session")
def start_server(pagoda_bin, default_model):
    """A factory: start_server(*flags) launches a server on the default model and stops it at the
    end of the session (tests that stop it themselves may)."""
    servers = []

    def start(*args, **kwargs):
        server = launch_server(pagoda_bin, *args, **kwargs)
        servers.append(server)
        return server

    yield start
    for server in servers:
        if server.proc.poll() is None:
            server.stop(signal.SIGKILL)


@pytest.fixture(scope="session")
def server(start_server):
    """The shared server: the default model, a short context so the KV pool is small. Its step
    budget is the fixed one (--step-time-target-ms 0): the tests that hold another server's
    greedy answers to this one's bit for bit need the same prefill chunks on both, and a
    step-time budget chunks by what each server measured (test_step_time_target.py covers it)."""
    return start_server("--max-model-len", "1024", "--served-model-name", "smollm2",
                        "--step-time-target-ms", "0",
                        "--served-model-name", "SmolLM2-135M-Instruct")


@pytest.fixture(scope="session")
def model_name():
    return "smollm2"


@pytest.fixture(scope="session")
def client(server):
    """The official OpenAI client (sync) pointed at the shared server."""
    import openai
    return openai.OpenAI(base_url=server.url("/v1"), api_key="unused", max_retries=0, timeout=60)


def async_client_for(server):
    """The official OpenAI client (async) for `server`; create it inside the running event loop."""
    import openai
    return openai.AsyncOpenAI(base_url=server.url("/v1"), api_key="unused", max_retries=0,
                              timeout=120)


@functools.lru_cache(maxsize=None)
def serve_has_grpc(pagoda_bin):
    """Whether `pagoda serve` takes --grpc-port (builds with -DPAGODA_ENABLE_GRPC=OFF do not)."""
    help_text = subprocess.run([str(pagoda_bin), "serve", "--help"], capture_output=True,
                               text=True, timeout=30).stdout
    return "--grpc-port" in help_text


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def stream_then_vanish(port, body, timeout=60):
    """Opens a streamed /v1/completions of `body` on `port`, reads until its first event (within
    `timeout` seconds a read), then resets the connection, as when a client process dies."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    payload = json.dumps(body).encode()
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload))
    await writer.drain()
    received = b""
    while b"data: " not in received:
        chunk = await asyncio.wait_for(reader.read(4096), timeout)
        assert chunk, "the server closed the stream"
        received += chunk
    assert received.startswith(b"HTTP/1.1 200")
    writer.transport.abort()  # a reset, as when a client process dies


def wait_for_metrics(server, want, timeout=20):
    """Waits until each metric in `want` (name: value) reads its value on `server`."""
    deadline = time.monotonic() + timeout
    while True:
        got = {name: server.metric(name) for name in want}
        if got == want:
            return
        assert time.monotonic() < deadline, f"metrics stuck at {got}, want {want}"
        time.sleep(0.05)
