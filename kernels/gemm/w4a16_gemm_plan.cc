#include "kernels/gemm/w4a16_gemm_plan.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>

namespace pagoda::kernels {
namespace w4a16 {

namespace {

int sm_count() {
  // One entry per device ordinal: the attribute never changes, and the launch path must not
  // make a runtime query per matmul.
  static std::array<std::atomic<int>, 64> cached{};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) return 132;
  int sms = cached[static_cast<std::size_t>(device)].load(std::memory_order_relaxed);
  if (sms == 0) {
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        sms <= 0) {
      return 132;
    }
    cached[static_cast<std::size_t>(device)].store(sms, std::memory_order_relaxed);
  }
  return sms;
}

}  // namespace

std::size_t smem_bytes(const Plan& p) {
  return static_cast<std::size_t>(x_buffers(p.m_tiles)) * p.x_rows *
             (p.chunk_tiles * kTileCols + kXPad) * 2 +
         ring_bytes(p.form, p.group_size);
}

void set_splits(Plan& p, int splits) {
  p.splits = std::max(1, splits);
  p.tiles_per_split = (p.k_tiles + p.splits - 1) / p.splits;
  p.splits = (p.k_tiles + p.tiles_per_split - 1) / p.tiles_per_split;
  // Equal chunks: 70 tiles in 48-tile chunks would leave one of 22.
  const int chunks = (p.tiles_per_split + p.most_chunk - 1) / p.most_chunk;
  p.chunk_tiles = (p.tiles_per_split + chunks - 1) / chunks;
}

// When the weight has too few row tiles to fill the GPU, K splits over as many CTAs as fill one
// wave (whole waves: a second, partial wave would leave most SMs idle), without leaving a warp
// fewer than kMinTilesPerWarp tiles; a CTA walks its K range in chunks of x that
// fit a buffer.
Plan plan_for(std::int64_t m, std::int64_t n, std::int64_t k, Form form, std::int64_t group_size) {
  Plan p;
  p.form = form;
  p.group_size = static_cast<int>(std::min<std::int64_t>(group_size, 1 << 24));
  p.m_tiles = m <= 16 ? 1 : m <= 32 ? 2 : 4;
  p.m_blocks = static_cast<int>((m + 16 * p.m_tiles - 1) / (16 * p.m_tiles));
  p.n_tiles = static_cast<int>((n + kTileRows - 1) / kTileRows);
  p.k_tiles = static_cast<int>((k + kTileCols - 1) / kTileCols);
  p.x_rows = static_cast<int>(std::min<std::int64_t>(m, 16 * p.m_tiles));
  p.most_chunk = std::max(1, (x_buffer_bytes(p.m_tiles) / (2 * p.x_rows) - kXPad) / kTileCols);
  const int ctas = (p.n_tiles + kWarps - 1) / kWarps * p.m_blocks;
  const int most = std::max(1, p.k_tiles / kMinTilesPerWarp);
  set_splits(p, 1);
  // How many CTAs an SM holds depends on the chunk of x, which the split shrinks: twice is enough.
  for (int pass = 0; pass < 2; ++pass) {
    const int per_sm =
        std::max<int>(1, std::min<int>(min_ctas_per_sm(p.m_tiles, p.form),
                                       static_cast<int>(kSmemPerSm / (smem_bytes(p) + 1024))));
    set_splits(p, std::min(std::max(1, per_sm * sm_count() / ctas), most));
  }
  return p;
}

std::size_t partial_bytes(const Plan& p, std::int64_t m, std::int64_t n) {
  return p.splits > 1 ? static_cast<std::size_t>(p.splits) * m * n * sizeof(float) : 0;
}

Form form_of(const W4A16Weights& w) {
  if (w.scale_codes == nullptr) return Form::kZeroPoint;
  switch (w.hi_bits) {
    case 1: return Form::kGguf5;
    case 2: return Form::kGguf6;
    case 4: return Form::kGguf8;
    default: return Form::kGguf4;
  }
}

}  // namespace w4a16

using namespace w4a16;

std::int64_t w4a16_gemm_counter_count(std::int64_t max_m, std::int64_t n) {
  const std::int64_t n_ctas = ((n + kTileRows - 1) / kTileRows + kWarps - 1) / kWarps;
  return n_ctas * ((max_m + 15) / 16);
}

std::size_t w4a16_gemm_workspace_bytes(std::int64_t m, std::int64_t n, std::int64_t k) {
  // The most any form's plan takes: the splits depend on the ring and the chunk of x together,
  // so no one form splits K the most for every shape.
  std::size_t most = partial_bytes(plan_for(m, n, k, Form::kZeroPoint, 32), m, n);
  for (const Form f : {Form::kGguf4, Form::kGguf5, Form::kGguf6, Form::kGguf8}) {
    for (const int group_size : {16, 32}) {
      most = std::max(most, partial_bytes(plan_for(m, n, k, f, group_size), m, n));
    }
  }
  return most;
}

}  // namespace pagoda::kernels
