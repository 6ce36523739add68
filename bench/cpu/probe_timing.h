// Timing shared by the hand-written core probes (vnni_probe.cc, amx_probe.cc): best-of-three wall
// time, and the core clock from a chain of dependent multiplies.
#pragma once

#include <algorithm>
#include <chrono>

namespace pagoda::bench {

/// The shortest of three runs of fn, in seconds.
template <typename Fn>
double best_seconds(Fn&& fn) {
  double best = 1e30;
  for (int run = 0; run < 3; ++run) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

/// Cycles per second: 16 dependent 64-bit multiplies per iteration, 3 cycles each on every x86
/// core since Sandy Bridge and Zen. (A chain of `add $1` is not one a cycle everywhere: Golden
/// Cove cores fold immediate adds at rename and ran it at "21 GHz".)
inline double clock_hz() {
  constexpr long kIterations = 20'000'000;
  const double seconds = best_seconds([] {
    long x = 3;
    asm volatile("mov %1, %%rcx\n 1:\n .rept 16\n imul %0, %0\n .endr\n dec %%rcx\n jnz 1b\n"
                 : "+r"(x)
                 : "r"(kIterations)
                 : "rcx", "cc");
  });
  return 3.0 * 16.0 * kIterations / seconds;
}

}  // namespace pagoda::bench
