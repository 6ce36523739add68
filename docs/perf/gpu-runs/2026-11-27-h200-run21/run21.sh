#!/usr/bin/env bash
set -u
o=$OUT
timeout 100 ncu --clock-control none -k regex:w4a16_gemm_kernel --launch-skip 5 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SourceCounters --section Occupancy \
  --section LaunchStats --section MemoryWorkloadAnalysis --section InstructionStats \
  --metrics smsp__pcsamp_warps_issue_stalled_long_scoreboard,smsp__pcsamp_warps_issue_stalled_short_scoreboard,smsp__pcsamp_warps_issue_stalled_wait,smsp__pcsamp_warps_issue_stalled_math_pipe_throttle,smsp__pcsamp_warps_issue_stalled_mio_throttle,smsp__pcsamp_warps_issue_stalled_barrier,smsp__pcsamp_warps_issue_stalled_not_selected,smsp__pcsamp_warps_issue_stalled_selected,smsp__pcsamp_warps_issue_stalled_lg_throttle,smsp__pcsamp_warps_issue_stalled_dispatch_stall,smsp__pcsamp_warps_issue_stalled_no_instructions,smsp__pcsamp_warps_issue_stalled_branch_resolving,smsp__inst_executed.sum,smsp__cycles_active.avg \
  gpu_bench kernels w4a16 >"$o/ncu.log" 2>&1
echo "ncu rc=$?"
timeout 60 ncu --clock-control none -k regex:w4a16 --launch-skip 10 --launch-count 4 --section SpeedOfLight gpu_bench kernels w4a16 >"$o/ncu_kernels.log" 2>&1
grep -a -E "w4a16|Duration" "$o/ncu_kernels.log" | cut -c1-150
grep -a -E "pcsamp|inst_executed|cycles_active|Duration|Occupancy|Registers" "$o/ncu.log"
