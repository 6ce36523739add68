#include "kernels/sampling/sampling_slots.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "backend/cuda/cuda_status.h"
#include "kernels/sampling/logits_processing.h"

namespace pagoda::kernels {

namespace {

using cuda::DeviceBuffer;

Status check_ids(std::span<const std::int32_t> ids, std::int64_t vocab_size, const char* what) {
  for (const std::int32_t id : ids) {
    if (id < 0 || id >= vocab_size) {
      return invalid_argument(std::string(what) + " token " + std::to_string(id) +
                              " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    }
  }
  return Status::ok_status();
}

// Host-to-device copy of `count` T from pageable memory: the call returns once the source is
// staged, so the caller's vector may go right after.
template <typename T>
Status upload(void* device, std::size_t offset_elements, const T* host, std::size_t count,
              cudaStream_t stream) {
  if (count == 0) return Status::ok_status();
  PAGODA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(static_cast<T*>(device) + offset_elements, host,
                                              count * sizeof(T), cudaMemcpyHostToDevice, stream));
  return Status::ok_status();
}

StatusOr<DeviceBuffer> allocate(std::size_t bytes) {
  return DeviceBuffer::allocate(std::max<std::size_t>(bytes, 16));
}

}  // namespace

bool SamplingSlotTable::is_open(std::int32_t slot) const {
  return slot >= 0 && static_cast<std::size_t>(slot) < slots_.size() &&
         slots_[static_cast<std::size_t>(slot)].open;
}

const SlotRecord* SamplingSlotTable::record(std::int32_t slot) const {
  return is_open(slot) ? &slots_[static_cast<std::size_t>(slot)].record : nullptr;
}

SlotArrays SamplingSlotTable::arrays() const {
  return {.slots = records_.as<SlotRecord>(),
          .ids = arena_ids_.as<std::int32_t>(),
          .values = arena_values_.as<float>(),
          .counts = counts_.as<std::int32_t>(),
          .prompt = prompt_.as<std::uint32_t>()};
}

std::int64_t SamplingSlotTable::device_bytes() const {
  return static_cast<std::int64_t>(records_.bytes() + arena_ids_.bytes() + arena_values_.bytes() +
                                   counts_.bytes() + prompt_.bytes() + accepted_.bytes());
}

Status SamplingSlotTable::open(std::int32_t slot, const SlotSamplingConfig& config,
                               cudaStream_t stream) {
  if (slot < 0) return invalid_argument("sampling slot " + std::to_string(slot) + " is negative");
  if (is_open(slot)) {
    return invalid_argument("sampling slot " + std::to_string(slot) + " is open already");
  }
  PAGODA_RETURN_IF_ERROR(config.validate(vocab_size_));

  PAGODA_RETURN_IF_ERROR(reserve_records(static_cast<std::int64_t>(slot) + 1, stream));
  if (static_cast<std::size_t>(slot) >= slots_.size()) slots_.resize(slot + 1);
  Slot s;
  SlotRecord& r = s.record;
  r.presence = config.presence_penalty;
  r.frequency = config.frequency_penalty;
  r.repetition = config.repetition_penalty;
  r.min_tokens = config.min_tokens;
  r.bias_count = static_cast<std::int32_t>(config.logit_bias.size());
  for (const auto& [id, bias] : config.logit_bias) {
    s.ids.push_back(id);
    s.values.push_back(bias);
  }
  if (config.min_tokens > 0) {
    r.banned_count = static_cast<std::int32_t>(config.min_tokens_banned_ids.size());
    s.ids.insert(s.ids.end(), config.min_tokens_banned_ids.begin(),
                 config.min_tokens_banned_ids.end());
    s.values.resize(s.ids.size(), 0.0f);
  }
  if (config.has_penalties()) {
    PAGODA_ASSIGN_OR_RETURN(r.penalty_row, take_penalty_row(stream));
    const auto words = static_cast<std::size_t>(SamplingBatch::mask_words(vocab_size_));
    std::vector<std::uint32_t> prompt(words, 0u);
    // The prompt set counts only for the repetition penalty (as on the CPU).
    if (config.repetition_penalty != 1.0f) {
      for (const std::int32_t id : config.prompt_token_ids) {
        prompt[static_cast<std::size_t>(id) >> 5] |= 1u << (id & 31);
      }
    }
    PAGODA_RETURN_IF_ERROR(upload(prompt_.data(), static_cast<std::size_t>(r.penalty_row) * words,
                                  prompt.data(), words, stream));
    PAGODA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
        counts_.as<std::int32_t>() + static_cast<std::int64_t>(r.penalty_row) * vocab_size_, 0,
        static_cast<std::size_t>(vocab_size_) * sizeof(std::int32_t), stream));
  }
  slots_[static_cast<std::size_t>(slot)] = std::move(s);
  Status placed = place_lists(slot, stream);
  if (placed.ok()) placed = upload_record(slot, stream);
  if (!placed.ok()) {
    Slot& failed = slots_[static_cast<std::size_t>(slot)];
    if (failed.record.penalty_row >= 0) free_penalty_rows_.push_back(failed.record.penalty_row);
    failed = Slot{};
    return placed;
  }
  slots_[static_cast<std::size_t>(slot)].open = true;
  return Status::ok_status();
}

void SamplingSlotTable::close(std::int32_t slot) {
  if (!is_open(slot)) return;
  Slot& s = slots_[static_cast<std::size_t>(slot)];
  if (s.record.penalty_row >= 0) free_penalty_rows_.push_back(s.record.penalty_row);
  s = Slot{};  // its arena range is reclaimed at the next compaction
}

Status SamplingSlotTable::accept(std::int32_t slot, std::span<const std::int32_t> tokens,
                                 cudaStream_t stream) {
  if (!is_open(slot)) {
    return invalid_argument("sampling slot " + std::to_string(slot) + " is not open");
  }
  PAGODA_RETURN_IF_ERROR(check_ids(tokens, vocab_size_, "accepted"));
  const std::int32_t row = slots_[static_cast<std::size_t>(slot)].record.penalty_row;
  if (row < 0 || tokens.empty()) return Status::ok_status();
  const auto n = static_cast<std::int64_t>(tokens.size());
  if (n > accepted_capacity_) {
    const std::int64_t capacity = std::max<std::int64_t>(n, 2 * accepted_capacity_);
    PAGODA_ASSIGN_OR_RETURN(accepted_, allocate(static_cast<std::size_t>(capacity) * 4));
    accepted_capacity_ = capacity;
  }
  PAGODA_RETURN_IF_ERROR(upload(accepted_.data(), 0, tokens.data(), tokens.size(), stream));
  return launch_add_token_counts({.counts = counts_.as<std::int32_t>() + row * vocab_size_,
                                  .tokens = accepted_.as<std::int32_t>(),
                                  .num_tokens = n,
                                  .vocab_size = vocab_size_},
                                 stream);
}

// Grows the record array to hold `num_slots`, doubling; the open slots' records are sent again.
Status SamplingSlotTable::reserve_records(std::int64_t num_slots, cudaStream_t stream) {
  if (num_slots <= records_capacity_) return Status::ok_status();
  const std::int64_t capacity = std::max<std::int64_t>({num_slots, 2 * records_capacity_, 64});
  PAGODA_ASSIGN_OR_RETURN(DeviceBuffer grown,
                          allocate(static_cast<std::size_t>(capacity) * sizeof(SlotRecord)));
  std::vector<SlotRecord> all(static_cast<std::size_t>(capacity));
  for (std::size_t i = 0; i < slots_.size(); ++i) all[i] = slots_[i].record;
  PAGODA_RETURN_IF_ERROR(upload(grown.data(), 0, all.data(), all.size(), stream));
  records_ = std::move(grown);  // cudaFree waits for the work that still reads the old one
  records_capacity_ = capacity;
  return Status::ok_status();
}

Status SamplingSlotTable::upload_record(std::int32_t slot, cudaStream_t stream) {
  return upload(records_.data(), static_cast<std::size_t>(slot),
                &slots_[static_cast<std::size_t>(slot)].record, 1, stream);
}

// Appends the slot's lists to the arena, compacting it first when they do not fit.
Status SamplingSlotTable::place_lists(std::int32_t slot, cudaStream_t stream) {
  Slot& s = slots_[static_cast<std::size_t>(slot)];
  const auto need = static_cast<std::int64_t>(s.ids.size());
  if (need == 0) return Status::ok_status();
  if (arena_used_ + need > arena_capacity_) {
    PAGODA_RETURN_IF_ERROR(compact_arena(need, stream));
  }
  const auto offset = static_cast<std::int32_t>(arena_used_);
  PAGODA_RETURN_IF_ERROR(upload(arena_ids_.data(), static_cast<std::size_t>(offset), s.ids.data(),
                                s.ids.size(), stream));
  PAGODA_RETURN_IF_ERROR(upload(arena_values_.data(), static_cast<std::size_t>(offset),
                                s.values.data(), s.values.size(), stream));
  s.record.bias_offset = offset;
  s.record.banned_offset = offset + s.record.bias_count;
  arena_used_ += need;
  return Status::ok_status();
}

// Packs the open slots' lists to the front, in a new arena when they and `extra` more do not fit
// (twice that size), and sends the moved records.
Status SamplingSlotTable::compact_arena(std::int64_t extra, cudaStream_t stream) {
  std::vector<std::int32_t> ids;
  std::vector<float> values;
  for (Slot& s : slots_) {
    if (!s.open || s.ids.empty()) continue;
    s.record.bias_offset = static_cast<std::int32_t>(ids.size());
    s.record.banned_offset = s.record.bias_offset + s.record.bias_count;
    ids.insert(ids.end(), s.ids.begin(), s.ids.end());
    values.insert(values.end(), s.values.begin(), s.values.end());
  }
  const auto live = static_cast<std::int64_t>(ids.size());
  if (live + extra > arena_capacity_) {
    const std::int64_t capacity = std::max<std::int64_t>(2 * (live + extra), 4096);
    if (capacity >= 0x7fffffff) return invalid_argument("logit_bias and min_tokens lists too long");
    PAGODA_ASSIGN_OR_RETURN(DeviceBuffer new_ids, allocate(static_cast<std::size_t>(capacity) * 4));
    PAGODA_ASSIGN_OR_RETURN(DeviceBuffer new_values,
                            allocate(static_cast<std::size_t>(capacity) * 4));
    arena_ids_ = std::move(new_ids);
    arena_values_ = std::move(new_values);
    arena_capacity_ = capacity;
  }
  PAGODA_RETURN_IF_ERROR(upload(arena_ids_.data(), 0, ids.data(), ids.size(), stream));
  PAGODA_RETURN_IF_ERROR(upload(arena_values_.data(), 0, values.data(), values.size(), stream));
  arena_used_ = live;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].open && !slots_[i].ids.empty()) {
      PAGODA_RETURN_IF_ERROR(upload_record(static_cast<std::int32_t>(i), stream));
    }
  }
  return Status::ok_status();
}

// A free penalty row; when none is, the pool doubles (the rows in use copied over).
StatusOr<std::int32_t> SamplingSlotTable::take_penalty_row(cudaStream_t stream) {
  if (free_penalty_rows_.empty()) {
    const std::int32_t rows = std::max(4, 2 * penalty_rows_);
    const auto words = static_cast<std::size_t>(SamplingBatch::mask_words(vocab_size_));
    const auto row_counts = static_cast<std::size_t>(vocab_size_) * sizeof(std::int32_t);
    const std::size_t row_prompt = words * sizeof(std::uint32_t);
    auto counts = allocate(static_cast<std::size_t>(rows) * row_counts);
    auto prompt = allocate(static_cast<std::size_t>(rows) * row_prompt);
    if (!counts.ok() || !prompt.ok()) {
      return Status(StatusCode::kResourceExhausted,
                    "no GPU memory for " + std::to_string(rows) +
                        " penalty rows (presence, frequency or repetition penalties of that many "
                        "requests at once); lower --gpu-memory-utilization or --max-num-seqs");
    }
    if (penalty_rows_ > 0) {
      PAGODA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(counts->data(), counts_.data(),
                                                  penalty_rows_ * row_counts,
                                                  cudaMemcpyDeviceToDevice, stream));
      PAGODA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(prompt->data(), prompt_.data(),
                                                  penalty_rows_ * row_prompt,
                                                  cudaMemcpyDeviceToDevice, stream));
    }
    counts_ = std::move(*counts);
    prompt_ = std::move(*prompt);
    for (std::int32_t r = rows - 1; r >= penalty_rows_; --r) free_penalty_rows_.push_back(r);
    penalty_rows_ = rows;
  }
  const std::int32_t row = free_penalty_rows_.back();
  free_penalty_rows_.pop_back();
  return row;
}

}  // namespace pagoda::kernels
