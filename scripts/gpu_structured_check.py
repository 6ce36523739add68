#!/usr/bin/env python3
"""Structured outputs on the CUDA engine: the token masks reach the GPU sampler.

With random (dummy) weights the unconstrained output is noise, so every request that finishes
with `stop` and parses to what its constraint allows shows the mask was applied on the device.
Runs `pagoda serve --device cuda` on a dummy config, sends constrained completions (a choice, a
regex, a JSON schema; one at a time and 16 at once so masks meet batched rows), then SIGTERM
must exit 0. Standard library only (the GPU machine has python3 and nothing else of ours).

    scripts/gpu_check.sh exec python3 scripts/gpu_structured_check.py CONFIG TOKENIZER

Prints one PASS/FAIL line per check and exits 1 on a failure; the server log goes to
$OUT/structured_serve.log when $OUT is set. DEVICE=cpu dry-runs the script without a GPU.
"""
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

PORT = int(os.environ.get("PORT", "8124"))
BASE = f"http://127.0.0.1:{PORT}"

CHOICES = ["alpha", "beta", "gamma"]
REGEX = r"[0-9]{3}-[a-z]{2}"
SCHEMA = {
    "type": "object",
    "properties": {
        "colour": {"enum": ["red", "green", "blue"]},
        "ok": {"type": "boolean"},
    },
    "required": ["colour", "ok"],
    "additionalProperties": False,
}


def post(path, body, timeout=120):
    req = urllib.request.Request(BASE + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


MODEL = []  # the served name, read from /v1/models
SERVERS = []  # killed on the way out, whatever happened


def completion(constraint, seed):
    body = {"model": MODEL[0], "prompt": f"Answer {seed}:", "max_tokens": 48, "temperature": 0}
    body.update(constraint)
    choice = post("/v1/completions", body)["choices"][0]
    return choice["text"], choice["finish_reason"]


def schema_ok(text):
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return (isinstance(value, dict) and set(value) == {"colour", "ok"}
            and value["colour"] in SCHEMA["properties"]["colour"]["enum"]
            and isinstance(value["ok"], bool))


CHECKS = [
    ("choice", {"structured_outputs": {"choice": CHOICES}}, lambda t: t in CHOICES),
    ("regex", {"structured_outputs": {"regex": REGEX}}, lambda t: re.fullmatch(REGEX, t) is not None),
    ("json_schema", {"response_format": {"type": "json_schema",
                                         "json_schema": {"name": "s", "schema": SCHEMA}}}, schema_ok),
]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: gpu_structured_check.py CONFIG TOKENIZER")
    config, tokenizer = sys.argv[1:]
    log_path = os.path.join(os.environ.get("OUT", "/tmp"), "structured_serve.log")
    log = open(log_path, "w")
    server = subprocess.Popen(
        ["pagoda", "serve", config, "--load-format", "dummy", "--tokenizer", tokenizer,
         "--device", os.environ.get("DEVICE", "cuda"), "--max-num-seqs", "32", "--max-model-len", "1024",
         "--port", str(PORT)], stdout=log, stderr=subprocess.STDOUT)
    SERVERS.append(server)
    failures = 0

    def report(name, ok, detail=""):
        nonlocal failures
        failures += 0 if ok else 1
        print(f"{'PASS' if ok else 'FAIL'} {name} {detail}", flush=True)

    deadline = time.time() + 120
    while time.time() < deadline:
        if server.poll() is not None:
            break
        try:
            urllib.request.urlopen(BASE + "/health", timeout=1)
            time.sleep(0.5)  # a server already on the port answers too: ours must still be up
            break
        except OSError:
            time.sleep(0.3)
    else:
        server.kill()
    if server.poll() is not None:
        report("serve ready", False, f"exited {server.returncode}; see {log_path}")
        sys.exit(1)
    report("serve ready", True)
    with urllib.request.urlopen(BASE + "/v1/models", timeout=10) as resp:
        MODEL.append(json.loads(resp.read())["data"][0]["id"])

    for name, constraint, valid in CHECKS:
        try:
            text, reason = completion(constraint, 0)
        except urllib.error.HTTPError as e:
            report(f"{name} single", False, f"HTTP {e.code}: {e.read()[:300]!r}")
            continue
        report(f"{name} single", reason == "stop" and valid(text), repr(text))
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            results = list(pool.map(lambda i: completion(constraint, i), range(16)))
        good = sum(1 for t, r in results if r == "stop" and valid(t))
        report(f"{name} 16 at once", good == 16, f"{good}/16 valid; first {results[0][0]!r}")

    server.send_signal(signal.SIGTERM)
    try:
        rc = server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        rc = "hung"
    report("SIGTERM exits 0", rc == 0, f"rc={rc}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    try:
        main()
    finally:
        for child in SERVERS:
            if child.poll() is None:
                child.kill()
