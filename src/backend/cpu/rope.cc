#include "backend/cpu/rope.h"

#include <cmath>
#include <numbers>

#include "common/check.h"

// Built with -ffp-contract=off: HF rounds x*cos and x2*sin separately before adding; an FMA
// would round once and drift from HF by an ulp.

namespace pagoda::cpu {

namespace {

// Pair i of one head, for each style:
//
//   rotate-half (h = head_dim/2):   x[i], x[i + h]      i in [0, h)
//   adjacent pairs:                 x[2i], x[2i + 1]
//
//   (a, b) -> (a*cos - b*sin, b*cos + a*sin)
void rotate_head(float* x, const float* cos, const float* sin, RopeStyle style, std::int64_t half) {
  const std::int64_t first_stride = style == RopeStyle::kRotateHalf ? 1 : 2;
  const std::int64_t second_offset = style == RopeStyle::kRotateHalf ? half : 1;
  for (std::int64_t i = 0; i < half; ++i) {
    float& a = x[i * first_stride];
    float& b = x[i * first_stride + second_offset];
    const float a0 = a;
    const float b0 = b;
    a = a0 * cos[i] - b0 * sin[i];
    b = b0 * cos[i] + a0 * sin[i];
  }
}

void check_shapes(std::int64_t head_dim) {
  PAGODA_CHECK(head_dim > 0 && head_dim % 2 == 0) << "head_dim " << head_dim;
}

}  // namespace

std::vector<float> rope_inv_freq(std::int64_t head_dim, double theta, const RopeScaling& scaling) {
  check_shapes(head_dim);
  const std::int64_t half = head_dim / 2;
  std::vector<float> inv_freq(static_cast<std::size_t>(half));
  const auto base = static_cast<float>(theta);
  for (std::int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv_freq[i] = 1.0f / std::pow(base, exponent);
  }
  const auto factor = static_cast<float>(scaling.factor);
  if (scaling.type == RopeScalingType::kLinear) {
    for (float& f : inv_freq) f /= factor;
  } else if (scaling.type == RopeScalingType::kLlama3) {
    // Wavelengths above the low-frequency cutoff are stretched by `factor`, those below the
    // high-frequency cutoff kept, and the band between interpolated smoothly.
    const auto old_len = static_cast<float>(scaling.original_max_position_embeddings);
    const auto low = static_cast<float>(scaling.low_freq_factor);
    const auto high = static_cast<float>(scaling.high_freq_factor);
    const auto low_freq_wavelen = static_cast<float>(
        static_cast<double>(scaling.original_max_position_embeddings) / scaling.low_freq_factor);
    const auto high_freq_wavelen = static_cast<float>(
        static_cast<double>(scaling.original_max_position_embeddings) / scaling.high_freq_factor);
    const auto two_pi = static_cast<float>(2.0 * std::numbers::pi);
    for (float& f : inv_freq) {
      const float wavelen = two_pi / f;
      const float stretched = wavelen > low_freq_wavelen ? f / factor : f;
      const float smooth = (old_len / wavelen - low) / (high - low);
      const float smoothed = (1.0f - smooth) * stretched / factor + smooth * stretched;
      const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
      f = medium ? smoothed : stretched;
    }
  }
  return inv_freq;
}

void apply_rope(const float* inv_freq, RopeStyle style, const std::int32_t* positions,
                std::int64_t num_tokens, float* q, std::int64_t num_heads, float* k,
                std::int64_t num_kv_heads, std::int64_t head_dim) {
  check_shapes(head_dim);
  const std::int64_t half = head_dim / 2;
  thread_local std::vector<float> cos;
  thread_local std::vector<float> sin;
  cos.resize(static_cast<std::size_t>(half));
  sin.resize(static_cast<std::size_t>(half));
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    // One cos/sin table per token, shared by every q and k head.
    const auto position = static_cast<float>(positions[t]);
    for (std::int64_t i = 0; i < half; ++i) {
      const float angle = position * inv_freq[i];
      cos[i] = std::cos(angle);
      sin[i] = std::sin(angle);
    }
    for (std::int64_t h = 0; h < num_heads; ++h) {
      rotate_head(q + (t * num_heads + h) * head_dim, cos.data(), sin.data(), style, half);
    }
    for (std::int64_t h = 0; h < num_kv_heads; ++h) {
      rotate_head(k + (t * num_kv_heads + h) * head_dim, cos.data(), sin.data(), style, half);
    }
  }
}

void apply_rope_reference(const float* inv_freq, RopeStyle style, const std::int32_t* positions,
                          std::int64_t num_tokens, float* q, std::int64_t num_heads, float* k,
                          std::int64_t num_kv_heads, std::int64_t head_dim) {
  check_shapes(head_dim);
  const std::int64_t half = head_dim / 2;
  auto rotate = [&](float* x, std::int64_t t) {
    for (std::int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(positions[t]) * inv_freq[i];
      const float c = std::cos(angle);
      const float s = std::sin(angle);
      const std::int64_t a = style == RopeStyle::kRotateHalf ? i : 2 * i;
      const std::int64_t b = style == RopeStyle::kRotateHalf ? i + half : 2 * i + 1;
      const float a0 = x[a];
      const float b0 = x[b];
      x[a] = a0 * c - b0 * s;
      x[b] = b0 * c + a0 * s;
    }
  };
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    for (std::int64_t h = 0; h < num_heads; ++h) rotate(q + (t * num_heads + h) * head_dim, t);
    for (std::int64_t h = 0; h < num_kv_heads; ++h)
      rotate(k + (t * num_kv_heads + h) * head_dim, t);
  }
}

}  // namespace pagoda::cpu
