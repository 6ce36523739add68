#!/usr/bin/env bash
# What reasoning traces cost: `pagoda bench offline` with tracing off, at 1% sampling, and on
# every request with top-5 alternatives, alternated over R rounds in one invocation (same
# binary, same machine state), plus a trace file whose reader is slowed on purpose (a FIFO
# drained at a few KB/s): the sink must drop events, not slow the engine.
#
#   bench/trace/trace_cost.sh [--rounds R] [--threads T] [--bin build/pagoda]
#
# Prints per-run lines and a table of medians: output tok/s, ITL p99, and the ratio to "off".
set -euo pipefail
cd "$(dirname "$0")/../.."

rounds=3
threads=2
bin=build/pagoda
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -x "$bin" ]] || { echo "no $bin; build first (scripts/build.sh)" >&2; exit 1; }

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
bench=("$bin" bench offline --num-prompts 16 --input-len 64 --output-len 96 --max-num-seqs 16
       --threads "$threads" --no-single-stream)

declare -A modes=(
  [off]=""
  [sample_1pct]="--trace-file $work/t1.jsonl --trace-sample-rate 0.01"
  [all_top5]="--trace-file $work/t2.jsonl --trace-sample-rate 1 --trace-top-n 5"
  [slow_sink]="--trace-file $work/fifo --trace-sample-rate 1 --trace-top-n 5 --trace-queue-bytes 65536"
)
order=(off sample_1pct all_top5 slow_sink)

results="$work/results.txt"
for ((r = 1; r <= rounds; r++)); do
  for mode in "${order[@]}"; do
    if [[ $mode == slow_sink ]]; then
      rm -f "$work/fifo"; mkfifo "$work/fifo"
      # The reader: 4 KB every 0.5 s (8 KB/s), far below what a traced batch produces.
      python3 -c '
import sys, time
f = open(sys.argv[1], "rb")
while f.read(4096):
    time.sleep(0.5)
' "$work/fifo" &
    fi
    # shellcheck disable=SC2086
    out=$("${bench[@]}" ${modes[$mode]})
    line=$(grep '^concurrent' <<<"$out")
    tok=$(sed -E 's/.*output +([0-9.]+) tok\/s.*/\1/' <<<"$line")
    p99=$(sed -E 's/.*p99 ([0-9.]+) ms.*/\1/' <<<"$line")
    trace=$(grep '^trace:' <<<"$out" || echo "trace: off")
    echo "round $r $mode: output $tok tok/s, ITL p99 $p99 ms | $trace"
    echo "$mode $tok $p99" >>"$results"
    if [[ $mode == slow_sink ]]; then kill %1 2>/dev/null || true; wait 2>/dev/null || true; fi
  done
done

python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    mode, tok, p99 = line.split()
    rows.setdefault(mode, []).append((float(tok), float(p99)))
off_tok = statistics.median(t for t, _ in rows["off"])
off_p99 = statistics.median(p for _, p in rows["off"])
print("\n| mode | output tok/s (median) | vs off | ITL p99 ms (median) | vs off |")
print("|---|---|---|---|---|")
for mode in ["off", "sample_1pct", "all_top5", "slow_sink"]:
    tok = statistics.median(t for t, _ in rows[mode])
    p99 = statistics.median(p for _, p in rows[mode])
    print(f"| {mode} | {tok:.1f} | {tok / off_tok:.3f} | {p99:.2f} | {p99 / off_p99:.3f} |")
PY
