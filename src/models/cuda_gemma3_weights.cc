#include "models/cuda_gemma3_weights.h"

#include <cuda_runtime_api.h>

#include "backend/cpu/rope.h"
#include "backend/cuda/cuda_status.h"
#include "backend/cuda/random_fill.h"
#include "models/architecture.h"

namespace pagoda::models {

namespace {

using cuda::DeviceBuffer;
using cuda::ScalarType;

StatusOr<DeviceBuffer> upload_vector(const std::vector<float>& host, ScalarType dtype) {
  std::vector<std::uint8_t> staged(host.size() * cuda::scalar_type_size(dtype));
  cuda::convert_from_f32(host.data(), static_cast<std::int64_t>(host.size()), dtype, staged.data());
  PAGODA_ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::allocate(staged.size()));
  PAGODA_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(buffer.data(), staged.data(), staged.size(), cudaMemcpyHostToDevice));
  return buffer;
}

StatusOr<DeviceBuffer> local_table(const ModelConfig& c) {
  if (!c.rope_local_theta) return DeviceBuffer();
  return upload_vector(cpu::rope_inv_freq(c.head_dim, *c.rope_local_theta, {}), ScalarType::kF32);
}

}  // namespace

std::size_t CudaGemma3Weights::device_bytes() const {
  std::size_t bytes = local_inv_freq.bytes();
  for (const CudaGemma3LayerWeights& l : layers) {
    bytes += l.pre_feedforward_layernorm.bytes() + l.post_feedforward_layernorm.bytes();
  }
  return bytes;
}

StatusOr<CudaGemma3Weights> upload_gemma3_weights(const ModelConfig& c, const LlamaWeights& host,
                                                  ScalarType dtype) {
  CudaGemma3Weights w;
  for (const LlamaLayerWeights& h : host.layers) {
    if (h.pre_feedforward_layernorm.empty()) break;
    CudaGemma3LayerWeights layer;
    PAGODA_ASSIGN_OR_RETURN(layer.pre_feedforward_layernorm,
                            upload_vector(h.pre_feedforward_layernorm, dtype));
    PAGODA_ASSIGN_OR_RETURN(layer.post_feedforward_layernorm,
                            upload_vector(h.post_feedforward_layernorm, dtype));
    w.layers.push_back(std::move(layer));
  }
  if (!host.rope_local_inv_freq.empty()) {
    PAGODA_ASSIGN_OR_RETURN(w.local_inv_freq,
                            upload_vector(host.rope_local_inv_freq, ScalarType::kF32));
  }
  return w;
}

StatusOr<CudaGemma3Weights> dummy_gemma3_weights(const ModelConfig& c, ScalarType dtype,
                                                 std::uint64_t next_seed) {
  PAGODA_ASSIGN_OR_RETURN(const Architecture* arch, architecture_of(c));
  CudaGemma3Weights w;
  if (arch->sandwich_norms) {
    const std::size_t bytes =
        static_cast<std::size_t>(c.hidden_size) * cuda::scalar_type_size(dtype);
    for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
      CudaGemma3LayerWeights layer;
      for (DeviceBuffer* norm :
           {&layer.pre_feedforward_layernorm, &layer.post_feedforward_layernorm}) {
        PAGODA_ASSIGN_OR_RETURN(*norm, DeviceBuffer::allocate(bytes));
        PAGODA_RETURN_IF_ERROR(cuda::fill_uniform(norm->data(), c.hidden_size, dtype, 0.9f, 1.1f,
                                                  next_seed++, nullptr));
      }
      w.layers.push_back(std::move(layer));
    }
  }
  PAGODA_ASSIGN_OR_RETURN(w.local_inv_freq, local_table(c));
  PAGODA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return w;
}

}  // namespace pagoda::models
