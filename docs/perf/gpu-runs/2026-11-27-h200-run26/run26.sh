#!/usr/bin/env bash
# Session 15, call 3 (short, to leave a later call): the pipelined decode attention kernel on its
# first run: both kernels against the CPU oracle and each other (decode tests only), Gemma 3's
# head_dim 256 / window decode, speculation on the tiny checkpoints, then G1-G3 + the b256
# serving shape for both kernels.
set -u
o=$OUT; sum=$o/summary.txt
step() { local name=$1 cap=$2 log=$3; shift 3; local s=$SECONDS; echo "== $name" >>"$log"
  timeout "$cap" "$@" >>"$log" 2>&1; echo "$name rc=$? $((SECONDS - s))s" >>"$sum"; }
step decode_test 20 "$o/tests.log" gpu_paged_attention_test --gtest_color=no --gtest_filter='*Decode*'
step gemma3_kernels 20 "$o/tests.log" gpu_gemma3_kernels_test --gtest_color=no
step bench_decode 25 "$o/bench.log" gpu_bench kernels decode
step speculative 15 "$o/tests.log" gpu_speculative_test --gtest_color=no --gtest_filter='*tiny*'
{ grep -a -E '^\[  FAILED  \] |^\[  PASSED  \]|differ at' "$o/tests.log" | head -20
  grep -a '^RESULT' "$o/bench.log"; } >>"$sum"
cat "$sum"
