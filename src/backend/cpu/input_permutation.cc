#include "backend/cpu/input_permutation.h"

#include <vector>

namespace pagoda::cpu {

void gather_columns(const float* x, std::int64_t m, std::int64_t k, const std::int32_t* perm,
                    float* xp) {
  for (std::int64_t i = 0; i < m; ++i) {
    const float* row = x + i * k;
    float* out = xp + i * k;
    for (std::int64_t j = 0; j < k; ++j) out[j] = row[perm[j]];
  }
}

bool any_input_permutation(std::span<const MatmulOutput> outputs) {
  for (const MatmulOutput& out : outputs) {
    if (out.w.input_permutation != nullptr) return true;
  }
  return false;
}

void matmul_permuted(ThreadPool& pool, const float* x, std::int64_t m,
                     std::span<const MatmulOutput> outputs, MatmulKernel kernel) {
  const std::int64_t k = outputs[0].w.num_cols;
  thread_local std::vector<float> gathered;
  MatmulOutput plain[kMaxFusedOutputs];
  std::size_t num_plain = 0;
  for (const MatmulOutput& out : outputs) {
    if (out.w.input_permutation == nullptr) {
      plain[num_plain++] = out;
      continue;
    }
    gathered.resize(static_cast<std::size_t>(m * k));
    gather_columns(x, m, k, out.w.input_permutation, gathered.data());
    MatmulOutput stored = out;
    stored.w.input_permutation = nullptr;
    matmul_fused(pool, gathered.data(), m, std::span(&stored, 1), kernel);
  }
  if (num_plain > 0) matmul_fused(pool, x, m, std::span(plain, num_plain), kernel);
}

void matmul_reference_permuted(const float* x, std::int64_t m, const TensorView& w,
                               const float* bias, float* y) {
  std::vector<float> gathered(static_cast<std::size_t>(m * w.num_cols));
  gather_columns(x, m, w.num_cols, w.input_permutation, gathered.data());
  TensorView stored = w;
  stored.input_permutation = nullptr;
  matmul_reference(gathered.data(), m, stored, bias, y);
}

}  // namespace pagoda::cpu
