// What this core can issue, measured in hand-written loops: the ceiling that the int16 tile
// (src/backend/cpu/matmul_int16_avx512.cc) is judged against in docs/perf/cpu.md.
//
//   pagoda_vnni_probe            (x86-64 with AVX-512 VNNI; about 10 s)
//
// 1. The clock, from a chain of dependent multiplies (probe_timing.h).
// 2. vpdpwssd: latency (one chain) and peak issue rate (16 chains), on 1 thread and on 2 at once.
// 3. What a companion op costs the vpdpwssd stream: 16 independent vpdpwssd plus 4 of the op per
//    iteration, less 16 alone, in cycles per op (0.5 = it takes a vpdpwssd's slot).
// 4. The int16 tile's own instruction mix for 12 weight rows x 16 column pairs of one Q4_1 block
//    (the 16-row decode step's matmuls), written out in assembly so no compiler choice enters:
//    the bare loop, then with the per-block fp32 epilogue, then with the next block's decode.
// 5. DRAM read bandwidth, 1 and 2 threads, over a 512 MiB buffer.
//
// Loops run from registers and L1 unless stated; each figure is the best of three runs.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "probe_timing.h"

namespace {

using Clock = std::chrono::steady_clock;

using pagoda::bench::best_seconds;
using pagoda::bench::clock_hz;

// Every zmm a probe may write; the loops below touch no other state but rcx and memory.
#define PAGODA_ZMM_CLOBBERS                                                                     \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",      \
      "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", \
      "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", \
      "xmm31"

// Runs `body` `iterations` times with %0 = data (64-byte aligned, 64 KiB, in L1/L2) and
// %1 = raw (a second such buffer); returns the best time of three runs in seconds. zmm28 and
// zmm29 stand for x's scales and scaled sums, zmm30 for the decode's nibble mask: only the
// instruction mix is timed, no value is checked.
#define PAGODA_TIMED_LOOP(iterations, body)                                     \
  best_seconds([&] {                                                            \
    const void* d = data;                                                       \
    const void* r = raw;                                                        \
    asm volatile(                                                               \
        "vpxord %%zmm28, %%zmm28, %%zmm28\n vpxord %%zmm29, %%zmm29, %%zmm29\n" \
        "vpternlogd $0xFF, %%zmm30, %%zmm30, %%zmm30\n"                         \
        "mov %2, %%rcx\n 1:\n" body "dec %%rcx\n jnz 1b\n"                      \
        : "+r"(d), "+r"(r)                                                      \
        : "r"(static_cast<long>(iterations))                                    \
        : "rcx", "memory", "cc", PAGODA_ZMM_CLOBBERS);                          \
  })

alignas(64) std::uint8_t data[64 << 10];
alignas(64) std::uint8_t raw[64 << 10];

// 16 independent vpdpwssd chains, one step each per iteration.
#define PAGODA_DP16 \
  ".irp a, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n vpdpwssd %%zmm16, %%zmm17, %%zmm\\a\n .endr\n"

double dp_peak_per_second() {
  constexpr long kIterations = 20'000'000;
  return 16.0 * kIterations / PAGODA_TIMED_LOOP(kIterations, PAGODA_DP16);
}

// 4. One Q4_1 block of the int16 tile for 12 weight rows: per column pair, one x vector (zmm31)
// and 12 weight pairs broadcast from the decoded block (%0 + 64 r + 4 p); the first pair is a
// vpmaddwd, so each row's block sum starts fresh.
#define PAGODA_TILE_PAIRS(extra)                                   \
  ".irp p, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"                \
  " vmovdqu64 8192+\\p*64(%0), %%zmm31\n"                          \
  " .irp w, 0,1,2,3,4,5,6,7,8,9,10,11\n"                           \
  "  vpbroadcastd \\w*64+\\p*4(%0), %%zmm24\n"                     \
  "  .if \\p == 0\n vpmaddwd %%zmm24, %%zmm31, %%zmm\\w\n .else\n" \
  "   vpdpwssd %%zmm24, %%zmm31, %%zmm\\w\n .endif\n"              \
  "  " extra                                                       \
  " .endr\n"                                                       \
  ".endr\n"

// The next block's decode of row w, during pair w * 16 / 12, as decode_block_int16 does it for
// Q4_1: fp16 scale and min to fp32 scalars, 16 bytes of nibbles to 32 int16 (64 bytes stored).
#define PAGODA_TILE_DECODE                                                     \
  ".if (\\w * 16 / 12) == \\p\n"                                               \
  " vpinsrw $0, \\w*20(%1), %%xmm26, %%xmm26\n vcvtph2ps %%xmm26, %%xmm26\n"   \
  " vmovss %%xmm26, 4096+\\w*4(%0)\n"                                          \
  " vpinsrw $0, \\w*20+2(%1), %%xmm27, %%xmm27\n vcvtph2ps %%xmm27, %%xmm27\n" \
  " vmovss %%xmm27, 4096+256+\\w*4(%0)\n"                                      \
  " vmovdqu32 \\w*20+4(%1), %%xmm26\n vpsrlw $4, %%xmm26, %%xmm27\n"           \
  " vpandd %%xmm30, %%xmm27, %%xmm27\n vpandd %%xmm30, %%xmm26, %%xmm26\n"     \
  " vinserti32x4 $1, %%xmm27, %%ymm26, %%ymm26\n vpmovsxbw %%ymm26, %%zmm26\n" \
  " vmovdqa64 %%zmm26, 2048+\\w*64(%0)\n"                                      \
  ".endif\n"

// Per row: block sum to fp32, times (weight scale x x's scales), into the accumulator, plus
// Q4_1's min times x's scaled sums.
#define PAGODA_TILE_EPILOGUE                                                  \
  ".macro pagoda_epilogue w, acc\n"                                           \
  " vcvtdq2ps %%zmm\\w, %%zmm\\w\n"                                           \
  " vmulps 4096+\\w*4(%0)%{1to16%}, %%zmm28, %%zmm25\n"                       \
  " vfmadd231ps %%zmm\\w, %%zmm25, %%zmm\\acc\n"                              \
  " vfmadd231ps 4096+256+\\w*4(%0)%{1to16%}, %%zmm29, %%zmm\\acc\n"           \
  ".endm\n"                                                                   \
  "pagoda_epilogue 0, 12\n pagoda_epilogue 1, 13\n pagoda_epilogue 2, 14\n"   \
  "pagoda_epilogue 3, 15\n pagoda_epilogue 4, 16\n pagoda_epilogue 5, 17\n"   \
  "pagoda_epilogue 6, 18\n pagoda_epilogue 7, 19\n pagoda_epilogue 8, 20\n"   \
  "pagoda_epilogue 9, 21\n pagoda_epilogue 10, 22\n pagoda_epilogue 11, 23\n" \
  ".purgem pagoda_epilogue\n"

double tile_dp_per_second(int variant) {
  constexpr long kIterations = 2'000'000;
  constexpr double kDps = 12.0 * 16.0 * kIterations;
  double seconds = 0;
  switch (variant) {
    case 0: seconds = PAGODA_TIMED_LOOP(kIterations, PAGODA_TILE_PAIRS("")); break;
    case 1:
      seconds = PAGODA_TIMED_LOOP(kIterations, PAGODA_TILE_PAIRS("") PAGODA_TILE_EPILOGUE);
      break;
    default:
      seconds = PAGODA_TIMED_LOOP(kIterations,
                                  PAGODA_TILE_PAIRS(PAGODA_TILE_DECODE) PAGODA_TILE_EPILOGUE);
      break;
  }
  return kDps / seconds;
}

double read_bandwidth(int threads) {
  const std::size_t bytes = std::size_t{512} << 20;
  auto* buffer = static_cast<std::uint8_t*>(std::aligned_alloc(64, bytes));
  std::memset(buffer, 1, bytes);
  const double seconds = best_seconds([&] {
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        const std::uint8_t* p = buffer + bytes / threads * t;
        const std::uint8_t* end = p + bytes / threads;
        asm volatile(
            "1:\n vpaddd (%0), %%zmm0, %%zmm0\n vpaddd 64(%0), %%zmm1, %%zmm1\n"
            " vpaddd 128(%0), %%zmm2, %%zmm2\n vpaddd 192(%0), %%zmm3, %%zmm3\n"
            " add $256, %0\n cmp %1, %0\n jb 1b\n"
            : "+r"(p)
            : "r"(end)
            : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3");
      });
    }
    for (std::thread& worker : workers) worker.join();
  });
  std::free(buffer);
  return static_cast<double>(bytes) / seconds;
}

}  // namespace

int main() {
  if (!__builtin_cpu_supports("avx512vnni")) {
    std::fprintf(stderr, "pagoda_vnni_probe: this CPU has no AVX-512 VNNI\n");
    return 2;
  }
  const double hz = clock_hz();
  std::printf("clock (dependent imul): %.2f GHz\n", hz / 1e9);

  constexpr long kChainIterations = 20'000'000;
  const double chain =
      PAGODA_TIMED_LOOP(kChainIterations, ".rept 8\n vpdpwssd %%zmm16, %%zmm17, %%zmm0\n .endr\n");
  std::printf("vpdpwssd latency: %.2f cycles\n", chain * hz / (8.0 * kChainIterations));

  std::printf("vpdpwssd peak, 1 thread: %.2f per cycle\n", dp_peak_per_second() / hz);
  double both[2] = {};
  std::thread other([&] { both[1] = dp_peak_per_second(); });
  both[0] = dp_peak_per_second();
  other.join();
  std::printf("vpdpwssd peak, 2 threads at once: %.2f and %.2f per cycle\n", both[0] / hz,
              both[1] / hz);

  constexpr long kMixIterations = 20'000'000;
  const double alone = PAGODA_TIMED_LOOP(kMixIterations, PAGODA_DP16);
  struct Companion {
    const char* name;
    double seconds;
  };
#define PAGODA_MIX(name, op)                                                                     \
  Companion {                                                                                    \
    name, PAGODA_TIMED_LOOP(kMixIterations, PAGODA_DP16 ".irp o, 20,21,22,23\n" op "\n .endr\n") \
  }
  const Companion companions[] = {
      PAGODA_MIX("vmulps", "vmulps %%zmm18, %%zmm19, %%zmm\\o"),
      PAGODA_MIX("vfmadd231ps", "vfmadd231ps %%zmm18, %%zmm19, %%zmm\\o"),
      PAGODA_MIX("vpmaddwd", "vpmaddwd %%zmm18, %%zmm19, %%zmm\\o"),
      PAGODA_MIX("vcvtdq2ps", "vcvtdq2ps %%zmm18, %%zmm\\o"),
      PAGODA_MIX("vpaddd", "vpaddd %%zmm18, %%zmm19, %%zmm\\o"),
      PAGODA_MIX("vpsrlw", "vpsrlw $4, %%zmm18, %%zmm\\o"),
      PAGODA_MIX("vpmovsxbw", "vpmovsxbw %%ymm18, %%zmm\\o"),
      PAGODA_MIX("vpermd", "vpermd %%zmm18, %%zmm19, %%zmm\\o"),
      PAGODA_MIX("vpbroadcastd m32", "vpbroadcastd 4*\\o(%0), %%zmm\\o"),
      PAGODA_MIX("vmovdqu64 load", "vmovdqu64 64*\\o(%0), %%zmm\\o"),
      PAGODA_MIX("vmovdqa64 store", "vmovdqa64 %%zmm18, 2048+64*\\o(%0)"),
      PAGODA_MIX("vmovss store", "vmovss %%xmm18, 2048+4*\\o(%0)"),
  };
#undef PAGODA_MIX
  std::printf("companion op cost beside 16 vpdpwssd (cycles per op; 0.50 = one vpdpwssd slot):\n");
  for (const Companion& c : companions) {
    std::printf("  %-18s %5.2f\n", c.name, (c.seconds - alone) * hz / (4.0 * kMixIterations));
  }

  std::printf("int16 tile mix, 12 weight rows x one Q4_1 block (vpdpwssd per cycle):\n");
  std::printf("  pairs only                 %.2f\n", tile_dp_per_second(0) / hz);
  std::printf("  + fp32 epilogue            %.2f\n", tile_dp_per_second(1) / hz);
  std::printf("  + next block's decode      %.2f\n", tile_dp_per_second(2) / hz);

  std::printf("DRAM read: %.1f GB/s on 1 thread, %.1f GB/s on 2\n", read_bandwidth(1) / 1e9,
              read_bandwidth(2) / 1e9);
  return 0;
}
