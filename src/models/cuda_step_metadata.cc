#include "models/cuda_step_metadata.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

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
  m.partition_size_ = offset;
  offset = aligned(offset + sizeof(std::int32_t));
  m.decode_seq_ids_ = offset;
  offset = aligned(offset + seqs * sizeof(std::int32_t));
  m.previous_pairs_ = offset;
  offset = aligned(offset + 2 * tokens * sizeof(std::int32_t));
  for (std::int64_t g = 0; g < capacity.num_extra_kv_groups; ++g) {
    m.group_slot_mapping_.push_back(offset);
    offset = aligned(offset + tokens * sizeof(std::int64_t));
  }
  // Last, so that a step copies only the block-table rows it uses (with KV groups, up to the
  // rows of the last group's tables).
  const std::size_t table_bytes =
      seqs * static_cast<std::size_t>(capacity.max_blocks_per_seq) * sizeof(std::int32_t);
  m.block_tables_ = offset;
  offset = aligned(offset + table_bytes);
  for (std::int64_t g = 0; g < capacity.num_extra_kv_groups; ++g) {
    m.group_block_tables_.push_back(offset);
    offset = aligned(offset + table_bytes);
  }
  m.total_ = offset;
  for (cuda::PinnedHostBuffer& pinned : m.pinned_) {
    PAGODA_ASSIGN_OR_RETURN(pinned, cuda::PinnedHostBuffer::allocate(m.total_));
  }
  PAGODA_ASSIGN_OR_RETURN(m.device_, cuda::DeviceBuffer::allocate(m.total_));
  return m;
}

Status CudaStepMetadata::upload(const ForwardBatch& batch, cudaStream_t stream,
                                std::span<const std::int32_t> previous_pairs,
                                std::span<const std::int32_t> decode_seq_ids) {
  if (batch.num_tokens() > capacity_.max_tokens || batch.num_seqs() > capacity_.max_seqs ||
      static_cast<std::int64_t>(decode_seq_ids.size()) > batch.num_seqs() ||
      batch.num_logits() > capacity_.max_tokens ||
      batch.num_seqs() * batch.max_blocks_per_seq >
          capacity_.max_seqs * capacity_.max_blocks_per_seq) {
    return invalid_argument("forward batch of " + std::to_string(batch.num_tokens()) + " tokens, " +
                            std::to_string(batch.num_seqs()) +
                            " sequences exceeds the executor's capacity (" +
                            std::to_string(capacity_.max_tokens) + " tokens, " +
                            std::to_string(capacity_.max_seqs) + " sequences)");
  }
  std::uint8_t* base = staging();
  PAGODA_RETURN_IF_ERROR(put_previous_pairs(base, previous_pairs));
  put(base, slot_mapping_, batch.slot_mapping);
  put(base, token_ids_, batch.token_ids);
  put(base, positions_, batch.positions);
  put(base, query_start_loc_, batch.query_start_loc);
  put(base, seq_lens_, batch.seq_lens);
  put(base, logits_indices_, batch.logits_indices);
  if (!decode_seq_ids.empty()) {
    std::memcpy(base + decode_seq_ids_, decode_seq_ids.data(), decode_seq_ids.size_bytes());
  }
  std::size_t used = put(base, block_tables_, batch.block_tables);
  if (batch.kv_groups.size() > group_block_tables_.size()) {
    return invalid_argument("forward batch with " + std::to_string(batch.kv_groups.size()) +
                            " extra KV groups; the executor has " +
                            std::to_string(group_block_tables_.size()));
  }
  for (std::size_t g = 0; g < batch.kv_groups.size(); ++g) {
    put(base, group_slot_mapping_[g], batch.kv_groups[g].slot_mapping);
    used = put(base, group_block_tables_[g], batch.kv_groups[g].block_tables);
  }
  PAGODA_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(device_.data(), base, used, cudaMemcpyHostToDevice, stream));
  next_pinned_ = (next_pinned_ + 1) % kPinnedBuffers;
  return Status::ok_status();
}

Status CudaStepMetadata::upload_padded_decode(const ForwardBatch& batch, std::int64_t padded_seqs,
                                              std::int32_t decode_partition_size,
                                              cudaStream_t stream,
                                              std::span<const std::int32_t> previous_pairs) {
  const std::int64_t seqs = batch.num_seqs();
  if (padded_seqs < seqs || padded_seqs > capacity_.max_seqs ||
      padded_seqs > capacity_.max_tokens || batch.num_tokens() != seqs ||
      batch.max_blocks_per_seq > capacity_.max_blocks_per_seq ||
      batch.kv_groups.size() > group_block_tables_.size()) {
    return invalid_argument("padded decode upload of " + std::to_string(seqs) + " sequences to " +
                            std::to_string(padded_seqs) + " exceeds the executor's capacity");
  }
  std::uint8_t* base = staging();
  PAGODA_RETURN_IF_ERROR(put_previous_pairs(base, previous_pairs));
  const auto pad = static_cast<std::size_t>(padded_seqs - seqs);
  const auto fill = [&](std::size_t offset, const auto& values, auto padding) {
    using T = std::decay_t<decltype(values[0])>;
    T* out = reinterpret_cast<T*>(base + offset);
    std::memcpy(out, values.data(), values.size() * sizeof(T));
    std::fill_n(out + values.size(), pad, static_cast<T>(padding));
  };
  fill(slot_mapping_, batch.slot_mapping, -1);
  fill(token_ids_, batch.token_ids, 0);
  fill(positions_, batch.positions, 0);
  fill(seq_lens_, batch.seq_lens, 0);
  // Every group's slots, so a graph's warm-up run over padding alone stores no K/V anywhere.
  static const std::vector<std::int64_t> kNoSlots;
  for (std::size_t g = 0; g < group_slot_mapping_.size(); ++g) {
    fill(group_slot_mapping_[g],
         g < batch.kv_groups.size() ? batch.kv_groups[g].slot_mapping : kNoSlots, -1);
  }
  auto* query_start = reinterpret_cast<std::int32_t*>(base + query_start_loc_);
  for (std::int64_t s = 0; s <= padded_seqs; ++s) query_start[s] = static_cast<std::int32_t>(s);
  put(base, logits_indices_, batch.logits_indices);
  *reinterpret_cast<std::int32_t*>(base + partition_size_) = decode_partition_size;
  // Block tables: the batch's rows at the fixed stride; padding rows are never read (seq_len 0).
  const auto stride = static_cast<std::size_t>(capacity_.max_blocks_per_seq) * sizeof(std::int32_t);
  const auto row = static_cast<std::size_t>(batch.max_blocks_per_seq) * sizeof(std::int32_t);
  const auto copy_tables = [&](std::size_t offset, const std::vector<std::int32_t>& tables) {
    for (std::int64_t s = 0; s < seqs; ++s) {
      std::memcpy(base + offset + s * stride, tables.data() + s * batch.max_blocks_per_seq, row);
    }
    if (seqs == 0 || row == 0) return cudaSuccess;
    return cudaMemcpy2DAsync(static_cast<std::uint8_t*>(device_.data()) + offset, stride,
                             base + offset, stride, row, static_cast<std::size_t>(seqs),
                             cudaMemcpyHostToDevice, stream);
  };
  PAGODA_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(device_.data(), base, block_tables_, cudaMemcpyHostToDevice, stream));
  PAGODA_CUDA_RETURN_IF_ERROR(copy_tables(block_tables_, batch.block_tables));
  for (std::size_t g = 0; g < batch.kv_groups.size(); ++g) {
    PAGODA_CUDA_RETURN_IF_ERROR(
        copy_tables(group_block_tables_[g], batch.kv_groups[g].block_tables));
  }
  next_pinned_ = (next_pinned_ + 1) % kPinnedBuffers;
  return Status::ok_status();
}

// The (token row, previous sampling row) pairs, checked and packed into the staging buffer.
Status CudaStepMetadata::put_previous_pairs(std::uint8_t* base,
                                            std::span<const std::int32_t> pairs) const {
  if (pairs.size() % 2 != 0 || pairs.size() > 2 * static_cast<std::size_t>(capacity_.max_tokens)) {
    return invalid_argument("previous-token pairs: " + std::to_string(pairs.size()) +
                            " values for a capacity of " + std::to_string(capacity_.max_tokens) +
                            " pairs");
  }
  if (!pairs.empty()) std::memcpy(base + previous_pairs_, pairs.data(), pairs.size_bytes());
  return Status::ok_status();
}

}  // namespace pagoda::models
