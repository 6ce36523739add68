"""The CPU's step-time target end to end: on a server with the default --step-time-target-ms, a
short request sent while a long prompt is being prefilled is answered before that prompt's first
token (it is admitted at the next step instead of waiting for the whole prefill); a negative
target is refused at start-up with the flag's name. Ordering, not timing, is what is checked."""
import json
import random
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
