"""The CPU's step-time target end to end: on a server with the default --step-time-target-ms, a
short request sent while a long prompt is being prefilled is answered before that prompt's first
token (it is admitted at the next step instead of waiting for the whole prefill); a negative
target is refused at start-up with the flag's name. Ordering, not timing, is what is checked."""
import json
import random
import socket
import subprocess
import threading
import time
import urllib.request

import pytest


@pytest.fixture(scope="module")
def target_server(start_server):
    # The default target (250 ms on the CPU); a context long enough for the long prompt.
    return start_server("--max-model-len", "2048", "--served-model-name", "smollm2")


def stream_completion(server, prompt, max_tokens, events, name):
    body = json.dumps({"model": "smollm2", "prompt": prompt, "max_tokens": max_tokens,
                       "temperature": 0, "ignore_eos": True, "stream": True}).encode()
    request = urllib.request.Request(server.url("/v1/completions"), data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        for line in response:
            if line.startswith(b"data:") and b"[DONE]" not in line:
                events.append((time.monotonic(), name, "token"))
    events.append((time.monotonic(), name, "done"))


def test_a_short_request_is_answered_during_a_long_prefill(target_server):
    rng = random.Random(3)
    long_prompt = [rng.randrange(1000, 20000) for _ in range(1800)]
    events = []
    long_thread = threading.Thread(target=stream_completion,
                                   args=(target_server, long_prompt, 2, events, "long"))
    long_thread.start()
    time.sleep(0.3)  # the long prompt is admitted and prefilling
    stream_completion(target_server, [1234, 2345, 3456], 1, events, "short")
    long_thread.join()
    first_long_token = min(t for t, name, kind in events if name == "long" and kind == "token")
    short_done = next(t for t, name, kind in events if name == "short" and kind == "done")
    assert short_done < first_long_token, events


def test_a_negative_target_is_refused(pagoda_bin):
    proc = subprocess.run([str(pagoda_bin), "serve", "--port", "0", "--grpc-port", "0",
                           "--step-time-target-ms", "-5"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "--step-time-target-ms" in proc.stdout + proc.stderr


# ---- issue 26, check 1: decoding streams beside a 6,000-token prompt -----------------------------
#
# Under the step-time target each step takes about the target (250 ms by default on the CPU: the
# budget is fitted to this machine's measured step times, so load on the machine shrinks the
# chunks rather than lengthening the steps), and every running stream gets one token per step:
# a stream's inter-token latency is one step. The bound is four targets (1 s): room for the
# fit's lag when the long prompt's attention grows its cost per token, and for a shared
# machine's noise. Without the target (--step-time-target-ms 0) a step carries a 2,048-token
# chunk of the long prompt, ~2.5 s here (docs/perf/step-time-target.md), so the test fails.
LONG_PROMPT = 6000
NUM_STREAMS = 8
ITL_P99_BOUND = 4 * 0.250


@pytest.fixture(scope="module")
def long_context_server(start_server):
    return start_server("--max-model-len", "6400", "--served-model-name", "smollm2")


def metric_value(samples, name, **labels):
    return sum(value for (n, ls), value in samples.items()
               if n == name and set(labels.items()) <= set(ls))


def wait_for(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


class Stream(threading.Thread):
    """A streamed completion whose chunks' arrival times are kept; stop() hangs up."""

    def __init__(self, server, prompt, max_tokens):
        super().__init__()
        self.server, self.prompt, self.max_tokens = server, prompt, max_tokens
        self.times, self.finish_reason = [], None
        self.stopping = threading.Event()

    def run(self):
        body = json.dumps({"model": "smollm2", "prompt": self.prompt, "max_tokens": self.max_tokens,
                           "temperature": 0, "ignore_eos": True, "stream": True}).encode()
        request = urllib.request.Request(self.server.url("/v1/completions"), data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=300) as response:
            for line in response:
                if self.stopping.is_set():
                    return  # leaving the with block closes the connection: the server aborts
                if line.startswith(b"data:") and b"[DONE]" not in line:
                    self.times.append(time.monotonic())
                    choice = json.loads(line[5:])["choices"][0]
                    self.finish_reason = choice.get("finish_reason") or self.finish_reason

    def stop(self):
        self.stopping.set()


def test_streams_keep_decoding_while_a_long_prompt_prefills(long_context_server):
    server = long_context_server
    rng = random.Random(26)
    streams = [Stream(server, [rng.randrange(1000, 20000) for _ in range(8)], 5000)
               for _ in range(NUM_STREAMS)]
    for s in streams:
        s.start()
    wait_for(lambda: all(len(s.times) >= 3 for s in streams), 120, "the streams never decoded")
    long = Stream(server, [rng.randrange(1000, 20000) for _ in range(LONG_PROMPT)], 2)
    sent = time.monotonic()
    long.start()
    long.join(timeout=300)
    done = time.monotonic()
    for s in streams:
        s.stop()
    for s in streams:
        s.join(timeout=60)
    assert long.finish_reason == "length" and len(long.times) >= 1, "the long prompt did not finish"
    gaps = sorted(b - a for s in streams for a, b in zip(s.times, s.times[1:])
                  if a >= sent and b <= done)
    p99 = gaps[min(len(gaps) - 1, int(0.99 * len(gaps)))]
    print(f"long prompt: {done - sent:.1f} s; {len(gaps)} gaps meanwhile, p50 "
          f"{gaps[len(gaps) // 2] * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {gaps[-1] * 1000:.0f} ms")
    # Each stream went on getting tokens all through the prefill, one per step.
    assert len(gaps) >= NUM_STREAMS * 5, gaps
    assert p99 < ITL_P99_BOUND, (p99, gaps[-10:])


def test_an_abandoned_long_prompt_stops_within_a_step(long_context_server):
    """A client that leaves during a 6,000-token prefill: its request is aborted at the next step
    (the step under way when it left may finish), its KV blocks are free when its end is
    counted, and no step runs after that."""
    server = long_context_server
    running = lambda: metric_value(server.samples(), "pagoda:num_requests_running")
    wait_for(lambda: running() == 0, 60, "the previous test's streams never ended")
    before = server.samples()
    rng = random.Random(2026)  # other ids than the first long prompt's: no prefix-cache hit
    body = json.dumps({"model": "smollm2", "max_tokens": 2, "stream": True,
                       "prompt": [rng.randrange(1000, 20000) for _ in range(LONG_PROMPT)]}).encode()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                     b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        steps_before = metric_value(before, "pagoda:engine_steps_total")
        # A few prefill chunks in (and far from its end: ~30 steps of the target's size).
        wait_for(lambda: metric_value(server.samples(), "pagoda:engine_steps_total")
                 >= steps_before + 4, 60, "the long prompt was not prefilled")
        at_close = server.samples()
        assert metric_value(at_close, "pagoda:kv_cache_usage_perc") > 0
        assert metric_value(at_close, "pagoda:request_success_total", finished_reason="abort") == \
            metric_value(before, "pagoda:request_success_total", finished_reason="abort")
    aborts = lambda s: metric_value(s, "pagoda:request_success_total", finished_reason="abort")
    counted = wait_for(lambda: (lambda s: s if aborts(s) > aborts(before) else None)(server.samples()),
                       30, "the abandoned request was never counted")
    steps = lambda s: metric_value(s, "pagoda:engine_steps_total")
    # The step under way at the hang-up (and one the scrape at_close may have just missed).
    assert steps(counted) - steps(at_close) <= 2, (steps(at_close), steps(counted))
    assert metric_value(counted, "pagoda:kv_cache_usage_perc") == 0
    assert metric_value(counted, "pagoda:num_requests_running") == 0
    time.sleep(1.0)
    idle = server.samples()
    assert steps(idle) == steps(counted), "steps ran after the abort"
    # Counted as what it was: an abort of 6,000 prompt tokens and no first token.
    assert aborts(idle) - aborts(before) == 1
    assert metric_value(idle, "pagoda:prompt_tokens_total") - \
        metric_value(before, "pagoda:prompt_tokens_total") == LONG_PROMPT
    assert metric_value(idle, "pagoda:time_to_first_token_seconds_count") == \
        metric_value(before, "pagoda:time_to_first_token_seconds_count")
