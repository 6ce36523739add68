#!/usr/bin/env bash
# The engine on the GPU, end to end, with a real model: what the unit tests cannot check without a
# device. Needs `pagoda` on PATH (run it through `scripts/gpu_check.sh exec`, which puts the
# bundle's binaries there) and python3; nothing else (bash and the Python standard library).
#
#   ninja -C build-gpu-check pagoda && scripts/gpu_check.sh prepare    # here: the bundle has pagoda
#   scripts/gpu_check.sh exec bash scripts/gpu_engine_check.sh MODEL    # on the GPU machine
#
# (a) generate: greedy text of a few fixed prompts, --device cuda --dtype f32 against --device cpu
# (b) bench offline --device cuda: 64 prompts x (128 in + 128 out), max-num-seqs 64
# (c) serve --device cuda: /health, /v1/completions (also compared with (a)'s CPU text),
#     concurrent completions, a streamed /v1/chat/completions, /metrics, then SIGTERM and a
#     clean exit
# It prints a PASS/FAIL table last and exits 1 when any check failed. Logs go to
# $OUT/gpu_engine_check/ when $OUT is set (the device tool brings them back), else a temp folder.
#
# Environment: GEN_TOKENS (32) tokens per generate prompt; BENCH_PROMPTS (64), BENCH_INPUT (128),
# BENCH_OUTPUT (128), BENCH_SEQS (64); SERVE_DTYPE (f32, so its greedy text can match the CPU's);
# SERVE_MAX_MODEL_LEN (2048); LOAD_TIMEOUT (900) seconds for serve to become healthy; DEVICE
# (cuda; cpu dry-runs this script itself on a machine without a GPU, with a small model).
set -uo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: scripts/gpu_engine_check.sh MODEL   (pagoda on PATH)" >&2
  exit 2
fi
MODEL=$1
GEN_TOKENS=${GEN_TOKENS:-32}
BENCH_PROMPTS=${BENCH_PROMPTS:-64}
BENCH_INPUT=${BENCH_INPUT:-128}
BENCH_OUTPUT=${BENCH_OUTPUT:-128}
BENCH_SEQS=${BENCH_SEQS:-64}
SERVE_DTYPE=${SERVE_DTYPE:-f32}
SERVE_MAX_MODEL_LEN=${SERVE_MAX_MODEL_LEN:-2048}
LOAD_TIMEOUT=${LOAD_TIMEOUT:-900}
DEVICE=${DEVICE:-cuda}

if ! command -v pagoda > /dev/null; then
  echo "gpu_engine_check: no pagoda on PATH (run through scripts/gpu_check.sh exec)" >&2
  exit 2
fi
if [[ -n "${OUT:-}" ]]; then LOGS="$OUT/gpu_engine_check"; else LOGS=$(mktemp -d); fi
mkdir -p "$LOGS"
echo "gpu_engine_check: pagoda $(command -v pagoda), model $MODEL, logs in $LOGS"

RESULTS=()
FAILED=0
record() {  # record NAME PASS|FAIL DETAIL
  RESULTS+=("$(printf '%-22s %-4s %s' "$1" "$2" "$3")")
  [[ "$2" == PASS ]] || FAILED=$((FAILED + 1))
  echo "== $1: $2 $3"
}

# ---- (a) generate: CUDA f32 against the CPU ---------------------------------------------------
PROMPTS=(
  "The capital of France is"
  "def fibonacci(n):"
  "Once upon a time, in a small village by the sea,"
  "List three primary colors:"
)
CPU_TEXT_0=""
for i in "${!PROMPTS[@]}"; do
  prompt=${PROMPTS[$i]}
  pagoda generate "$MODEL" --device "$DEVICE" --dtype f32 --temperature 0 --max-tokens "$GEN_TOKENS" \
    --prompt "$prompt" > "$LOGS/generate-$i-cuda.txt" 2> "$LOGS/generate-$i-cuda.err"
  rc_cuda=$?
  pagoda generate "$MODEL" --device cpu --temperature 0 --max-tokens "$GEN_TOKENS" \
    --prompt "$prompt" > "$LOGS/generate-$i-cpu.txt" 2> "$LOGS/generate-$i-cpu.err"
  rc_cpu=$?
  echo "--- prompt $i: $prompt"
  echo "cuda (rc $rc_cuda): $(cat "$LOGS/generate-$i-cuda.txt")"
  echo "cpu  (rc $rc_cpu): $(cat "$LOGS/generate-$i-cpu.txt")"
  tail -n 2 "$LOGS/generate-$i-cuda.err" | sed 's/^/  cuda: /'
  tail -n 2 "$LOGS/generate-$i-cpu.err" | sed 's/^/  cpu:  /'
  [[ $i -eq 0 ]] && CPU_TEXT_0=$(cat "$LOGS/generate-$i-cpu.txt")
  if [[ $rc_cuda -ne 0 || $rc_cpu -ne 0 ]]; then
    record "generate-$i" FAIL "exit codes cuda $rc_cuda, cpu $rc_cpu (see $LOGS/generate-$i-*.err)"
  elif cmp -s "$LOGS/generate-$i-cuda.txt" "$LOGS/generate-$i-cpu.txt"; then
    record "generate-$i" PASS "cuda f32 text == cpu text"
  else
    record "generate-$i" FAIL "cuda f32 text differs from cpu text"
  fi
done

# ---- (b) bench offline on the GPU ---------------------------------------------------------------
pagoda bench offline "$MODEL" --device "$DEVICE" --num-prompts "$BENCH_PROMPTS" \
  --input-len "$BENCH_INPUT" --output-len "$BENCH_OUTPUT" --max-num-seqs "$BENCH_SEQS" \
  > "$LOGS/bench.txt" 2>&1
rc=$?
cat "$LOGS/bench.txt"
if [[ $rc -eq 0 ]] && grep -q "^concurrent" "$LOGS/bench.txt" && grep -q " on $DEVICE" "$LOGS/bench.txt"; then
  record "bench-offline" PASS "$(grep -o 'output *[0-9.]* tok/s' "$LOGS/bench.txt" | head -n 1)"
else
  record "bench-offline" FAIL "exit code $rc (see $LOGS/bench.txt)"
fi

# ---- (c) serve on the GPU ---------------------------------------------------------------------
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
SERVE_ARGS=(serve "$MODEL" --device "$DEVICE" --dtype "$SERVE_DTYPE" --port "$PORT"
            --max-model-len "$SERVE_MAX_MODEL_LEN" --max-num-seqs 64)
if pagoda serve --help 2>/dev/null | grep -q -- --grpc-port; then SERVE_ARGS+=(--grpc-port 0); fi
pagoda "${SERVE_ARGS[@]}" > "$LOGS/serve.log" 2>&1 &
SERVE_PID=$!
echo "pagoda ${SERVE_ARGS[*]} (pid $SERVE_PID)"

# The HTTP checks, one line "NAME PASS|FAIL DETAIL" each on stdout; progress on stderr.
python3 - "$PORT" "$LOAD_TIMEOUT" "$GEN_TOKENS" "$CPU_TEXT_0" "${PROMPTS[0]}" "$SERVE_PID" \
  > "$LOGS/serve_checks.txt" 2> "$LOGS/serve_checks.err" <<'PY'
import json, os, sys, threading, time, urllib.error, urllib.request

port, load_timeout, gen_tokens, cpu_text, prompt, pid = sys.argv[1:7]
base = f"http://127.0.0.1:{port}"
load_timeout, gen_tokens, pid = float(load_timeout), int(gen_tokens), int(pid)

def say(name, ok, detail):
    print(f"{name} {'PASS' if ok else 'FAIL'} {detail}", flush=True)

def post(path, body, timeout=300):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()

def alive():
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False

deadline = time.monotonic() + load_timeout
healthy = False
while time.monotonic() < deadline and alive():
    try:
        with urllib.request.urlopen(base + "/health", timeout=5) as r:
            if r.status == 200:
                healthy = True
                break
    except (urllib.error.URLError, ConnectionError, OSError):
        pass
    time.sleep(1)
say("serve-health", healthy, f"/health 200 on port {port}" if healthy else "never became healthy")
if not healthy:
    sys.exit(0)

# One greedy completion: well-formed, and (f32) the same text as the CPU's generate.
status, body = post("/v1/completions", {"prompt": prompt, "max_tokens": gen_tokens,
                                        "temperature": 0})
try:
    parsed = json.loads(body)
    text = parsed["choices"][0]["text"]
    ok = status == 200 and parsed["object"] == "text_completion" and "usage" in parsed
    say("serve-completion", ok, f"HTTP {status}, {parsed['usage']['completion_tokens']} tokens: "
        f"{text!r}")
    same = text.rstrip("\n") == cpu_text.rstrip("\n")
    say("serve-vs-cpu-text", same, "engine on cuda == generate on cpu" if same
        else f"engine on cuda {text!r} != cpu {cpu_text!r}")
except (ValueError, KeyError, IndexError, TypeError) as e:
    say("serve-completion", False, f"HTTP {status}, malformed: {e}: {body[:300]!r}")

# Concurrent requests of different lengths: batched decodes beside chunked prefills.
results = [None] * 16
def one(i):
    words = " ".join(["word"] * (8 + 97 * i))
    results[i] = post("/v1/completions", {"prompt": f"Request {i}: {words}. Summarize:",
                                          "max_tokens": 16 + i, "temperature": 0.7, "seed": i})
threads = [threading.Thread(target=one, args=(i,)) for i in range(len(results))]
for t in threads: t.start()
for t in threads: t.join()
bad = []
for i, (status, body) in enumerate(results):
    try:
        parsed = json.loads(body)
        if status != 200 or not parsed["choices"] or parsed["usage"]["completion_tokens"] < 1:
            bad.append(f"{i}: HTTP {status}")
    except (ValueError, KeyError, TypeError):
        bad.append(f"{i}: malformed {body[:120]!r}")
say("serve-concurrent", not bad, f"{len(results)} requests" + (": " + "; ".join(bad) if bad else ""))

# A streamed chat: every SSE event is JSON, then [DONE].
req = urllib.request.Request(base + "/v1/chat/completions", method="POST",
                             headers={"Content-Type": "application/json"},
                             data=json.dumps({"messages": [{"role": "user", "content": "Hi!"}],
                                              "max_tokens": gen_tokens, "temperature": 0,
                                              "stream": True,
                                              "stream_options": {"include_usage": True}}).encode())
try:
    events, done, content, problem = 0, False, "", None
    with urllib.request.urlopen(req, timeout=300) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line:
                continue
            if not line.startswith("data: "):
                problem = f"not an SSE data line: {line[:120]!r}"
                break
            data = line[len("data: "):]
            if data == "[DONE]":
                done = True
                break
            chunk = json.loads(data)
            events += 1
            for choice in chunk.get("choices", []):
                content += choice.get("delta", {}).get("content") or ""
    ok = done and problem is None and events > 0
    say("serve-chat-stream", ok, f"{events} events{', [DONE]' if done else ', no [DONE]'}: "
        f"{content!r}" + (f" ({problem})" if problem else ""))
except urllib.error.HTTPError as e:
    say("serve-chat-stream", False, f"HTTP {e.code}: {e.read().decode()[:300]}")
except (ValueError, OSError) as e:
    say("serve-chat-stream", False, f"malformed stream: {e}")

try:
    with urllib.request.urlopen(base + "/metrics", timeout=30) as r:
        metrics = r.read().decode()
    blocks = [l for l in metrics.splitlines() if l.startswith("pagoda:num_kv_cache_blocks")]
    say("serve-metrics", bool(blocks), blocks[0] if blocks else "no pagoda:num_kv_cache_blocks")
except (urllib.error.URLError, OSError) as e:
    say("serve-metrics", False, str(e))
PY
while read -r name verdict detail; do
  record "$name" "$verdict" "$detail"
done < "$LOGS/serve_checks.txt"
if ! grep -q "^serve-health" "$LOGS/serve_checks.txt"; then
  record "serve-checks" FAIL "the HTTP checks did not run (see $LOGS/serve_checks.err)"
fi

# The startup lines name the device and the KV pool the profiling pass chose.
if grep -q "model ready .* on $DEVICE" "$LOGS/serve.log"; then
  record "serve-startup-log" PASS "$(grep -o "on $DEVICE.*KV blocks[^,]*" "$LOGS/serve.log" | head -n 1)"
else
  record "serve-startup-log" FAIL "no 'model ready ... on $DEVICE' line (see $LOGS/serve.log)"
fi

if kill -0 "$SERVE_PID" 2> /dev/null; then
  kill -TERM "$SERVE_PID"
  for _ in $(seq 1 60); do kill -0 "$SERVE_PID" 2> /dev/null || break; sleep 1; done
  if kill -0 "$SERVE_PID" 2> /dev/null; then
    kill -KILL "$SERVE_PID"
    wait "$SERVE_PID" 2> /dev/null
    record "serve-sigterm" FAIL "still running 60 s after SIGTERM (killed)"
  else
    wait "$SERVE_PID"
    rc=$?
    if [[ $rc -eq 0 ]]; then
      record "serve-sigterm" PASS "exit 0 after SIGTERM"
    else
      record "serve-sigterm" FAIL "exit code $rc after SIGTERM"
    fi
  fi
else
  wait "$SERVE_PID"
  record "serve-sigterm" FAIL "serve had already exited with $? (see $LOGS/serve.log)"
fi
echo "--- serve log (last 30 lines)"
tail -n 30 "$LOGS/serve.log"

echo
echo "gpu_engine_check summary ($MODEL)"
for line in "${RESULTS[@]}"; do echo "  $line"; done
echo "  ${#RESULTS[@]} checks, $FAILED failed"
[[ $FAILED -eq 0 ]]
