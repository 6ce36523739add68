// CudaDecoderOps' Gemma 3 ops: the scaled embedding and the sandwich norm.
#include "models/cuda_decoder_ops.h"

namespace pagoda::models {

Status CudaDecoderOps::embed_scaled(float scale) {
  return unimplemented("embed_scaled on CUDA");
}

Status CudaDecoderOps::post_norm_add_rms_norm(std::int64_t layer, NormWeight post,
                                              std::int64_t next_layer, NormWeight next) {
  return unimplemented("post_norm_add_rms_norm on CUDA");
}

}  // namespace pagoda::models
