// What the sampling kernels read and write, as plain structs shared by host and device: one
// record per logits row (a SamplingRow of pagoda/step_sampling.h, resolved against its slot),
// one per open slot (its lifelong processors), the slots' device arrays, and one logprobs record
// per row that asks. DeviceSampler (device_sampler.h) packs them; the kernels only read them.
//
// Slot state on the device (SamplingSlotTable, sampling_slots.h):
//
//   slots      [num_slots] SlotRecord ---- bias_offset/count ----> ids/values arena [arena]
//                  |                 \--- banned_offset/count ---> ids arena (values unused)
//                  | penalty_row (-1: no penalties)
//                  v
//   counts     [penalty_rows, vocab] int32: how often each token was output
//   prompt     [penalty_rows, mask_words(vocab)] bits: tokens of the prompt (repetition only)
#pragma once

#include <cstdint>

namespace pagoda::kernels {

/// The most alternatives a row may ask logprobs for (SamplingRow::num_logprobs).
inline constexpr int kMaxLogprobs = 20;

/// RowRecord::flags.
enum RowFlags : std::uint32_t {
  /// Draft verification: no draw, no processing, no count; the raw row goes to the host.
  kRowReturnLogits = 1u << 0,
  /// The dense processing pass runs (a mask or penalties): the token kernel reads the processed
  /// row instead of the raw one.
  kRowProcessed = 1u << 1,
  /// The sparse pass runs too (logit_bias, or min_tokens bans still active).
  kRowSparse = 1u << 2,
  /// The sampled token counts for the slot's penalties.
  kRowCountToken = 1u << 3,
};

/// One logits row of a step, as the kernels read it.
struct RowRecord {
  std::uint64_t seed = 0;
  std::int64_t position = 0;
  std::int32_t slot = -1;
  float temperature = 0.0f;
  std::int32_t top_k = 0;  ///< 0: off (the host maps <= 0 and >= vocab to 0)
  float top_p = 1.0f;
  float min_p = 0.0f;
  std::int32_t forced_token = -1;
  std::int32_t num_logprobs = -1;
  std::int32_t allowed_mask = -1;    ///< row of the step's masks, or -1
  std::int32_t logprobs_index = -1;  ///< record in the step's LogprobsRecord array, or -1
  std::uint32_t flags = 0;           ///< RowFlags
};
static_assert(sizeof(RowRecord) == 56);

/// An open slot's lifelong settings.
struct SlotRecord {
  float presence = 0.0f;
  float frequency = 0.0f;
  float repetition = 1.0f;
  std::int32_t penalty_row = -1;  ///< row of counts/prompt, or -1 (no penalties)
  std::int32_t bias_offset = 0;
  std::int32_t bias_count = 0;
  std::int32_t banned_offset = 0;
  std::int32_t banned_count = 0;  ///< 0 unless min_tokens > 0
  std::int64_t min_tokens = 0;
};
static_assert(sizeof(SlotRecord) == 40);

/// The slots' device arrays (SamplingSlotTable::view()).
struct SlotArrays {
  const SlotRecord* slots = nullptr;      ///< [num_slots]
  const std::int32_t* ids = nullptr;      ///< [arena]: bias ids and banned ids
  const float* values = nullptr;          ///< [arena]: bias values (unused for banned ids)
  std::int32_t* counts = nullptr;         ///< [penalty_rows, vocab]
  const std::uint32_t* prompt = nullptr;  ///< [penalty_rows, mask_words(vocab)]
};

/// The logprobs of one row: its token's and the num_logprobs best (descending, ties by id).
struct LogprobsRecord {
  float logprob = 0.0f;
  std::int32_t rank = 0;
  std::int32_t top_ids[kMaxLogprobs] = {};
  float top_logprobs[kMaxLogprobs] = {};
};
static_assert(sizeof(LogprobsRecord) == 168);

}  // namespace pagoda::kernels
