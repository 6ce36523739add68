// The attention logit soft-cap of the paged attention kernels (PagedAttentionParams::
// logit_softcap; Gemma 2's attn_logit_softcapping): score -> cap * tanh(score / cap).
//
// Each kernel keeps its scores in its own units (raw q.k, or q.k pre-multiplied by
// softmax_scale * log2(e)), so its launcher passes the cap in those units: with s = u * score,
// u * cap * tanh(score / cap) = (u * cap) * tanh(s / (u * cap)). The kernels take the cap and its
// inverse as parameters (constant bank, no register) and test the cap once per tile, a branch
// uniform over the grid: 0 costs one compare.
#pragma once

namespace pagoda::kernels {

/// The cap in the units of a kernel's scores, `units` of them per true score (1 / 0 when off).
struct SoftCap {
  float cap = 0.0f;
  float inv_cap = 0.0f;
};

inline SoftCap soft_cap_in_units(float logit_softcap, float units) {
  if (logit_softcap == 0.0f) return {};
  const float cap = logit_softcap * units;
  return {.cap = cap, .inv_cap = 1.0f / cap};
}

#if defined(__CUDACC__) || defined(PAGODA_CUDA_EMULATION)
/// cap * tanh(s / cap); tanhf (not tanh.approx) so FP32 runs stay close to the CPU's std::tanh.
/// Masked scores are set to -inf after this, never passed through it.
__device__ __forceinline__ float apply_soft_cap(float s, float cap, float inv_cap) {
  return cap * tanhf(s * inv_cap);
}
#endif

}  // namespace pagoda::kernels
