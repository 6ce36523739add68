#include "backend/cpu/rms_norm.h"

#include <cmath>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/elementwise_avx2.h"

namespace pagoda::cpu {

namespace {

void rms_norm_row(const float* x, const float* weight, float eps, std::int64_t hidden, float* out) {
  if (cpu_has_avx2()) {
    const float mean = avx2::sum_squares(x, hidden) / static_cast<float>(hidden);
    avx2::scale_by_weight(x, 1.0f / std::sqrt(mean + eps), weight, hidden, out);
    return;
  }
  float sum = 0.0f;
  for (std::int64_t i = 0; i < hidden; ++i) sum += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(sum / static_cast<float>(hidden) + eps);
  for (std::int64_t i = 0; i < hidden; ++i) out[i] = weight[i] * (x[i] * scale);
}

}  // namespace

void rms_norm(const float* x, const float* weight, float eps, std::int64_t num_tokens,
              std::int64_t hidden, float* out) {
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    rms_norm_row(x + t * hidden, weight, eps, hidden, out + t * hidden);
  }
}

void add_rms_norm(float* residual, const float* x, const float* weight, float eps,
                  std::int64_t num_tokens, std::int64_t hidden, float* out) {
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    float* r = residual + t * hidden;
    const float* xt = x + t * hidden;
    for (std::int64_t i = 0; i < hidden; ++i) r[i] += xt[i];
    rms_norm_row(r, weight, eps, hidden, out + t * hidden);
  }
}

void rms_norm_reference(const float* x, const float* weight, float eps, std::int64_t num_tokens,
                        std::int64_t hidden, float* out) {
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    const float* xt = x + t * hidden;
    double sum = 0.0;
    for (std::int64_t i = 0; i < hidden; ++i) sum += static_cast<double>(xt[i]) * xt[i];
    const double scale = 1.0 / std::sqrt(sum / static_cast<double>(hidden) + eps);
    for (std::int64_t i = 0; i < hidden; ++i) {
      out[t * hidden + i] = static_cast<float>(weight[i] * (xt[i] * scale));
    }
  }
}

}  // namespace pagoda::cpu
