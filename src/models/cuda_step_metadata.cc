#include "models/cuda_step_metadata.h"

#include <cstring>
#include <string>

#include "backend/cuda/cuda_status.h"

namespace pagoda::models {

namespace {

// Rounds up to 16 bytes so every array starts aligned for any load width.
std::size_t aligned(std::size_t bytes) {
  return (bytes + 15) & ~std::size_t{15};
}

template <typename T>
std::size_t put(std::uint8_t* base, std::size_t offset, const std::vector<T>& values) {
  std::memcpy(base + offset, values.data(), values.size() * sizeof(T));
  return aligned(offset + values.size() * sizeof(T));
}

}  // namespace

StatusOr<CudaStepMetadata> CudaStepMetadata::create(const Capacity& capacity) {
  if (capacity.max_tokens <= 0 || capacity.max_seqs <= 0 || capacity.max_blocks_per_seq <= 0) {
    return invalid_argument("step metadata needs positive capacities");
  }
  CudaStepMetadata m;
  m.capacity_ = capacity;
  const auto tokens = static_cast<std::size_t>(capacity.max_tokens);
  const auto seqs = static_cast<std::size_t>(capacity.max_seqs);
  std::size_t offset = 0;
  m.slot_mapping_ = offset;
  offset = aligned(offset + tokens * sizeof(std::int64_t));
  m.token_ids_ = offset;
  offset = aligned(offset + tokens * sizeof(std::int32_t));
  m.positions_ = offset;
  offset = aligned(offset + tokens * sizeof(std::int32_t));
  m.query_start_loc_ = offset;
  offset = aligned(offset + (seqs + 1) * sizeof(std::int32_t));
  m.seq_lens_ = offset;
  offset = aligned(offset + seqs * sizeof(std::int32_t));
  m.logits_indices_ = offset;
  offset = aligned(offset + tokens * sizeof(std::int32_t));
  m.block_tables_ = offset;
  offset = aligned(offset + seqs * static_cast<std::size_t>(capacity.max_blocks_per_seq) *
                                sizeof(std::int32_t));
  m.total_ = offset;
  PAGODA_ASSIGN_OR_RETURN(m.pinned_, cuda::PinnedHostBuffer::allocate(m.total_));
  PAGODA_ASSIGN_OR_RETURN(m.device_, cuda::DeviceBuffer::allocate(m.total_));
  return m;
}

Status CudaStepMetadata::upload(const ForwardBatch& batch, cudaStream_t stream) {
  if (batch.num_tokens() > capacity_.max_tokens || batch.num_seqs() > capacity_.max_seqs ||
      batch.num_logits() > capacity_.max_tokens ||
      batch.num_seqs() * batch.max_blocks_per_seq >
          capacity_.max_seqs * capacity_.max_blocks_per_seq) {
    return invalid_argument("forward batch of " + std::to_string(batch.num_tokens()) + " tokens, " +
                            std::to_string(batch.num_seqs()) +
                            " sequences exceeds the executor's capacity (" +
                            std::to_string(capacity_.max_tokens) + " tokens, " +
                            std::to_string(capacity_.max_seqs) + " sequences)");
  }
  auto* base = static_cast<std::uint8_t*>(pinned_.data());
  put(base, slot_mapping_, batch.slot_mapping);
  put(base, token_ids_, batch.token_ids);
  put(base, positions_, batch.positions);
  put(base, query_start_loc_, batch.query_start_loc);
  put(base, seq_lens_, batch.seq_lens);
  put(base, logits_indices_, batch.logits_indices);
  const std::size_t used = put(base, block_tables_, batch.block_tables);
  PAGODA_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(device_.data(), pinned_.data(), used, cudaMemcpyHostToDevice, stream));
  return Status::ok_status();
}

}  // namespace pagoda::models
