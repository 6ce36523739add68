#include "backend/cpu/matmul.h"

#include <cblas.h>

#include <algorithm>
#include <optional>
#include <span>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul_avx2.h"
#include "backend/cpu/matmul_avx512.h"
#include "backend/cpu/row_decoder.h"
#include "common/check.h"
#include "model/dequantize.h"

namespace pagoda::cpu {

namespace {

// Up to this many rows of x, decoding each weight block straight into registers for every tile
// of 4 rows beats decoding once into a panel (BM_MatmulCrossover, Q4_1 1536x576: direct 104 vs
// packed 72 GFLOP/s at 16 rows, 91 vs 84 at 32).
constexpr std::int64_t kDirectMaxRows = 32;
// With AVX-512, rows of x from here to kRowGroupMaxRows (batched decode) go to the row-group
// kernel: it decodes each weight once, where the direct kernel decodes it once per 4 rows
// (BM_MatmulBatchedDecode, docs/perf/cpu.md). Past that, x no longer stays in L2 across the
// weight groups and the K-blocked packed kernel wins.
constexpr std::int64_t kRowGroupMinRows = 4;
constexpr std::int64_t kRowGroupMaxRows = 64;
// Panel depth of the packed kernel: 256 floats x 16 columns = 16 KiB stays in L1 while every
// row of x streams past it; a multiple of 256 so K-quant super-blocks are never split.
constexpr std::int64_t kPanelDepth = 256;
// Weight rows per cblas_sgemm call of the BLAS path.
constexpr std::int64_t kBlasPanelRows = 64;

void add_bias(const float* bias, std::int64_t m, std::int64_t n, std::int64_t n_begin,
              std::int64_t n_end, float* y) {
  if (bias == nullptr) return;
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = n_begin; j < n_end; ++j) y[i * n + j] += bias[j];
  }
}

// Weight rows [n_begin, n_end) of any dequantizable type, one row decoded to fp32 at a time.
void direct_rows_decoded(const float* x, std::int64_t m, const TensorView& w, std::int64_t n_begin,
                         std::int64_t n_end, float* y) {
  const std::int64_t k = w.num_cols;
  thread_local std::vector<float> row;
  row.resize(static_cast<std::size_t>(k));
  for (std::int64_t n = n_begin; n < n_end; ++n) {
    decode_row(w, n, 0, k, row.data());
    if (cpu_has_avx2()) {
      avx2::matmul_direct(DType::kF32, x, m, k, nullptr,
                          reinterpret_cast<const std::uint8_t*>(row.data()), 0, 0, 1, y + n,
                          w.num_rows);
      continue;
    }
    for (std::int64_t i = 0; i < m; ++i) {
      // Four partial sums break the dependency chain for the compiler.
      float partial[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      const float* xr = x + i * k;
      std::int64_t j = 0;
      for (; j + 4 <= k; j += 4) {
        for (int l = 0; l < 4; ++l) partial[l] += xr[j + l] * row[j + l];
      }
      for (; j < k; ++j) partial[0] += xr[j] * row[j];
      y[i * w.num_rows + n] = (partial[0] + partial[1]) + (partial[2] + partial[3]);
    }
  }
}

void matmul_direct(ThreadPool& pool, const float* x, std::int64_t m, const TensorView& w,
                   const float* bias, float* y) {
  const std::int64_t k = w.num_cols;
  const std::int64_t n = w.num_rows;
  const bool in_registers = cpu_has_avx2() && avx2::decodes(w.dtype);
  std::vector<float> sums;
  if (in_registers && w.dtype == DType::kQ4_1) {
    sums.resize(static_cast<std::size_t>(m * (k / 32)));
    avx2::block_sums(x, m, k, sums.data());
  }
  const bool wide = cpu_has_avx512() && avx512::decodes(w.dtype);
  pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end) {
    if (wide) {
      avx512::matmul_direct(w.dtype, x, m, k, sums.data(), w.row(0), w.row_stride, begin, end, y,
                            n);
    } else if (in_registers) {
      avx2::matmul_direct(w.dtype, x, m, k, sums.data(), w.row(0), w.row_stride, begin, end, y, n);
    } else {
      direct_rows_decoded(x, m, w, begin, end, y);
    }
    add_bias(bias, m, n, begin, end, y);
  });
}

// How many groups ahead matmul_row_group prefetches weight rows.
constexpr std::int64_t kPrefetchGroups = 2;

// Asks for rows [first, first + count) of `w` (clipped to its end) to be brought into the cache.
void prefetch_rows(const TensorView& w, std::int64_t first, std::int64_t count) {
  const DTypeInfo& info = dtype_info(w.dtype);
  const std::size_t row_bytes = static_cast<std::size_t>(w.num_cols / info.block_size) *
                                static_cast<std::size_t>(info.block_bytes);
  for (std::int64_t r = first; r < std::min(first + count, w.num_rows); ++r) {
    const char* p = reinterpret_cast<const char*>(w.row(r));
    for (std::size_t offset = 0; offset < row_bytes; offset += 64) {
      __builtin_prefetch(p + offset, /*rw=*/0, /*locality=*/3);
    }
  }
}

// Per thread: groups of 4 weight rows, each decoded once into an fp32 buffer (4 x K floats, in
// L1 for SmolLM2's K) and then dotted with every row of x. The direct kernel instead decodes
// every block again for each tile of 4 rows of x, and decoding, not loading, is what costs.
void matmul_row_group(ThreadPool& pool, const float* x, std::int64_t m, const TensorView& w,
                      const float* bias, float* y) {
  const std::int64_t k = w.num_cols;
  const std::int64_t n = w.num_rows;
  const std::int64_t num_groups = (n + avx512::kRowGroup - 1) / avx512::kRowGroup;
  pool.parallel_for(num_groups, [&](std::int64_t begin, std::int64_t end) {
    thread_local std::vector<float> rows;
    // Zeroed so a short last group dots finite values.
    rows.assign(static_cast<std::size_t>(avx512::kRowGroup * k), 0.0f);
    for (std::int64_t g = begin; g < end; ++g) {
      const std::int64_t n0 = g * avx512::kRowGroup;
      const std::int64_t count = std::min(avx512::kRowGroup, n - n0);
      for (std::int64_t j = 0; j < count; ++j) decode_row(w, n0 + j, 0, k, rows.data() + j * k);
      // The dots touch no weight memory, so the hardware prefetcher stalls between groups and
      // each decode would start on cold misses: fetch the next group while this one computes.
      if (g + kPrefetchGroups < end) {
        prefetch_rows(w, n0 + kPrefetchGroups * avx512::kRowGroup, avx512::kRowGroup);
      }
      avx512::dot_rows(x, m, k, rows.data(), count, y + n0, n);
    }
    add_bias(bias, m, n, begin * avx512::kRowGroup, std::min(n, end * avx512::kRowGroup), y);
  });
}

// Per thread: 16 weight rows x 256 columns decoded and transposed into a panel, then every row
// of x multiplied against it in 6x16 register tiles.
//
//   W [N, K]:  rows n0..n0+15, cols k0..k0+255  --decode-->  rows [16, 256]
//              --transpose-->  panel [256, 16]   (panel[kk, j] = W[n0 + j, k0 + kk])
//   y[:, n0:n0+16] (+)= x[:, k0:k0+256] · panel
void matmul_packed(ThreadPool& pool, const float* x, std::int64_t m, const TensorView& w,
                   const float* bias, float* y) {
  const std::int64_t k = w.num_cols;
  const std::int64_t n = w.num_rows;
  const std::int64_t num_panels = (n + avx2::kPanelCols - 1) / avx2::kPanelCols;
  pool.parallel_for(num_panels, [&](std::int64_t begin, std::int64_t end) {
    thread_local std::vector<float> rows;
    thread_local std::vector<float> panel;
    rows.assign(static_cast<std::size_t>(avx2::kPanelCols * kPanelDepth), 0.0f);
    panel.resize(static_cast<std::size_t>(kPanelDepth * avx2::kPanelCols));
    for (std::int64_t p = begin; p < end; ++p) {
      const std::int64_t n0 = p * avx2::kPanelCols;
      const std::int64_t cols = std::min(avx2::kPanelCols, n - n0);
      for (std::int64_t k0 = 0; k0 < k; k0 += kPanelDepth) {
        const std::int64_t depth = std::min(kPanelDepth, k - k0);
        for (std::int64_t j = 0; j < cols; ++j) {
          decode_row(w, n0 + j, k0, depth, rows.data() + j * kPanelDepth);
        }
        for (std::int64_t kk = 0; kk < depth; ++kk) {
          for (std::int64_t j = 0; j < avx2::kPanelCols; ++j) {
            panel[static_cast<std::size_t>(kk * avx2::kPanelCols + j)] =
                j < cols ? rows[static_cast<std::size_t>(j * kPanelDepth + kk)] : 0.0f;
          }
        }
        avx2::gemm_packed(x + k0, m, k, panel.data(), depth, y + n0, n, cols, k0 > 0);
      }
    }
    add_bias(bias, m, n, begin * avx2::kPanelCols, std::min(n, end * avx2::kPanelCols), y);
  });
}

// Per thread: 64 weight rows decoded whole into an fp32 panel, then one single-threaded
// cblas_sgemm per panel (OpenBLAS's own threads would fight the pool's).
void matmul_blas_panel(ThreadPool& pool, const float* x, std::int64_t m, const TensorView& w,
                       const float* bias, float* y) {
  const std::int64_t k = w.num_cols;
  const std::int64_t n = w.num_rows;
  openblas_set_num_threads(1);
  const std::int64_t num_panels = (n + kBlasPanelRows - 1) / kBlasPanelRows;
  pool.parallel_for(num_panels, [&](std::int64_t begin, std::int64_t end) {
    thread_local std::vector<float> panel;
    panel.resize(static_cast<std::size_t>(kBlasPanelRows * k));
    for (std::int64_t p = begin; p < end; ++p) {
      const std::int64_t n0 = p * kBlasPanelRows;
      const std::int64_t rows = std::min(kBlasPanelRows, n - n0);
      for (std::int64_t j = 0; j < rows; ++j) decode_row(w, n0 + j, 0, k, panel.data() + j * k);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m),
                  static_cast<blasint>(rows), static_cast<blasint>(k), 1.0f, x,
                  static_cast<blasint>(k), panel.data(), static_cast<blasint>(k), 0.0f, y + n0,
                  static_cast<blasint>(n));
    }
    add_bias(bias, m, n, begin * kBlasPanelRows, std::min(n, end * kBlasPanelRows), y);
  });
}

}  // namespace

bool matmul_supported(DType dtype) {
  return dequantize_supported(dtype);
}

void matmul(ThreadPool& pool, const float* x, std::int64_t m, const TensorView& w,
            const float* bias, float* y, MatmulKernel kernel) {
  PAGODA_CHECK(matmul_supported(w.dtype)) << "matmul on " << dtype_name(w.dtype);
  PAGODA_CHECK(m >= 0 && w.num_cols > 0 && w.num_rows > 0) << m << "x" << w.num_cols;
  if (m == 0) return;
  if (kernel == MatmulKernel::kAuto) {
    kernel = m <= kDirectMaxRows ? MatmulKernel::kDirect : MatmulKernel::kPacked;
    if (cpu_has_avx512() && m >= kRowGroupMinRows && m <= kRowGroupMaxRows) {
      kernel = MatmulKernel::kRowGroup;
    }
  }
  if (kernel == MatmulKernel::kRowGroup && !cpu_has_avx512()) kernel = MatmulKernel::kPacked;
  if (kernel == MatmulKernel::kPacked && !cpu_has_avx2()) kernel = MatmulKernel::kBlasPanel;
  switch (kernel) {
    case MatmulKernel::kRowGroup: return matmul_row_group(pool, x, m, w, bias, y);
    case MatmulKernel::kPacked: return matmul_packed(pool, x, m, w, bias, y);
    case MatmulKernel::kBlasPanel: return matmul_blas_panel(pool, x, m, w, bias, y);
    default: return matmul_direct(pool, x, m, w, bias, y);
  }
}

void matmul_reference(const float* x, std::int64_t m, const TensorView& w, const float* bias,
                      float* y) {
  const std::int64_t k = w.num_cols;
  const std::optional<std::uint64_t> row_bytes = dtype_num_bytes(w.dtype, k);
  PAGODA_CHECK(row_bytes.has_value()) << k << " " << dtype_name(w.dtype) << " columns";
  std::vector<float> row(static_cast<std::size_t>(k));
  for (std::int64_t j = 0; j < w.num_rows; ++j) {
    const Status status = dequantize(w.dtype, std::span(w.row(j), *row_bytes), row);
    PAGODA_CHECK(status.ok()) << status.to_string();
    for (std::int64_t i = 0; i < m; ++i) {
      double sum = bias != nullptr ? bias[j] : 0.0;
      for (std::int64_t l = 0; l < k; ++l) sum += static_cast<double>(x[i * k + l]) * row[l];
      y[i * w.num_rows + j] = static_cast<float>(sum);
    }
  }
}

}  // namespace pagoda::cpu
