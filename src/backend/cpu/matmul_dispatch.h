// What matmul.cc (the kernel choice, the fp32 kernels) and matmul_int16.cc (the int16 kernels)
// share: the dispatch of fused outputs over the pool and a few helpers. Internal to the CPU
// backend: include only from those files.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_int16_avx2.h"
#include "backend/cpu/matmul_int16_avx512.h"
#include "backend/cpu/thread_pool.h"

namespace pagoda::cpu {

// Which ISA's int16 kernels run (same results either way): AVX-512 on VNNI CPUs, else AVX2.
inline bool int16_on_avx512() {
  return cpu_has_avx512_vnni();
}

// Rows of x up to which the int16 direct kernel runs on this CPU.
inline std::int64_t int16_direct_max_rows() {
  return int16_on_avx512() ? avx512::kInt16DirectMaxRows : avx2::kInt16DirectMaxRows;
}

inline void add_bias(const float* bias, std::int64_t m, std::int64_t n, std::int64_t n_begin,
                     std::int64_t n_end, float* y) {
  if (bias == nullptr) return;
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = n_begin; j < n_end; ++j) y[i * n + j] += bias[j];
  }
}

// Several outputs of one kernel in one pool dispatch. Each output's rows are cut into units of
// `rows_per_unit` (a group, tile or panel of its kernel); the units of all outputs form one range
// that the pool splits, and run(output, first_unit, end_unit) does the work of one piece.
//
//   units:  [ output 0: 0 .. u0 ) [ output 1: u0 .. u0+u1 ) [ output 2 ... )
//   thread ranges cut anywhere; a range crossing a boundary runs once per output it touches.
template <typename Run>
void dispatch(ThreadPool& pool, std::span<const MatmulOutput> outputs, std::int64_t rows_per_unit,
              const Run& run, ThreadPool::Schedule schedule = ThreadPool::Schedule::kGuided) {
  std::array<std::int64_t, kMaxFusedOutputs + 1> first_unit{};
  for (std::size_t t = 0; t < outputs.size(); ++t) {
    first_unit[t + 1] = first_unit[t] + (outputs[t].w.num_rows + rows_per_unit - 1) / rows_per_unit;
  }
  pool.parallel_for(
      first_unit[outputs.size()],
      [&](std::int64_t begin, std::int64_t end) {
        for (std::size_t t = 0; t < outputs.size(); ++t) {
          const std::int64_t lo = std::max(begin, first_unit[t]);
          const std::int64_t hi = std::min(end, first_unit[t + 1]);
          if (lo < hi) run(outputs[t], lo - first_unit[t], hi - first_unit[t]);
        }
      },
      schedule);
}

// The AVX-512 broadcast kernel (matmul.cc): fp32 x, or int16 x when int16_activations
// (kBroadcastInt16's AVX-512 pieces).
void matmul_broadcast(ThreadPool& pool, const float* x, std::int64_t m,
                      std::span<const MatmulOutput> outputs, bool int16_activations);

// kBroadcastInt16 and kDirectInt16 (matmul_int16.cc).
void matmul_broadcast_int16(ThreadPool& pool, const float* x, std::int64_t m,
                            std::span<const MatmulOutput> outputs);
void matmul_direct_int16(ThreadPool& pool, const float* x, std::int64_t m,
                         std::span<const MatmulOutput> outputs);

}  // namespace pagoda::cpu
