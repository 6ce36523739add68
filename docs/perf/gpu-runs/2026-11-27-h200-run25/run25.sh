#!/usr/bin/env bash
# Session 15, call 2: where the 8B serving step goes. gpu_bench model at the serving shape
# (Llama-3.1-8B dummy BF16, context 1500 = run 24's mean, batch 1/64/256: step times, G15, b1
# weight bytes / copy bandwidth); ncu's per-kernel time for one eager b256 decode step (the
# bench's cudaProfilerStart/Stop range); gpu_paged_attention_test with a longer cap (run 24's
# 60 s ran out in its last test, on the host oracle); G1-G3.
set -u
o=$OUT; sum=$o/summary.txt
DEADLINE=$((SECONDS + ${BUDGET:-400}))
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >>"$sum"
step() {  # step NAME CAP LOG CMD...
  local name=$1 cap=$2 log=$3; shift 3
  local left=$((DEADLINE - SECONDS)); ((left < 5)) && { echo "$name SKIPPED (deadline)" >>"$sum"; return; }
  ((cap > left)) && cap=$left
  local s=$SECONDS; echo "== $name" >>"$log"
  timeout "$cap" "$@" >>"$log" 2>&1; local rc=$?
  echo "$name rc=$rc $((SECONDS - s))s" >>"$sum"
}
CFG=configs/models/llama-3.1-8b.json
step model 110 "$o/model.log" gpu_bench model --config $CFG --batch 1,64,256 --context 1500 --steps 16
step ncu_b256 130 "$o/ncu.log" ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum \
  --print-summary per-kernel gpu_bench model --config $CFG --batch 256 --context 1500 --steps 4
step paged_attention 150 "$o/tests.log" gpu_paged_attention_test --gtest_color=no
step decode_kernels 40 "$o/bench.log" gpu_bench kernels decode
{ grep -a -E '^RESULT' "$o/model.log"
  grep -a -E '^\[  FAILED  \]|^\[  PASSED  \]|^\[       OK \]' "$o/tests.log"
  grep -a '^RESULT G' "$o/bench.log"; } >>"$sum"
# ncu's summary: kernel name, count and summed time, largest first.
python3 - "$o/ncu.log" >>"$sum" 2>&1 <<'PY'
import re, sys
rows, name = [], None
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"^\s{2}(\S.*?)\s+\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)", line)
    if m: name = m.group(1); continue
    m = re.match(r"^\s+Section: Command line profiler metrics", line)
    m2 = re.match(r"^\s+gpu__time_duration\.sum\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", line)
    if name and m2:
        unit, a, b, c = m2.groups(); rows.append((name, unit, a, b, c))
print("-- ncu rows:", len(rows))
for r in rows: print(" | ".join(r))
PY
cat "$sum"
