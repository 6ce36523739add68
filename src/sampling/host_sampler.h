// The CPU sampler: every rule of pagoda/step_sampling.h over a [rows, vocab] logits matrix, rows
// spread over a thread pool, with each open slot's lifelong settings and penalty counts. It is
// the CPU executor's sampler and the oracle the CUDA sampler is tested against.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "pagoda/status.h"
#include "pagoda/step_sampling.h"

namespace pagoda::cpu {
class ThreadPool;
}

namespace pagoda::sampling {

/// Slot states and the batched sample; not thread-safe (one step at a time).
class HostSampler {
 public:
  explicit HostSampler(std::int64_t vocab_size);
  ~HostSampler();
  HostSampler(HostSampler&&) noexcept;
  HostSampler& operator=(HostSampler&&) noexcept;

  std::int64_t vocab_size() const { return vocab_size_; }

  /// Opens `slot` with `config`; INVALID_ARGUMENT for a token id outside the vocabulary or a
  /// slot that is open already.
  Status open_slot(std::int32_t slot, const SlotSamplingConfig& config);
  /// Forgets `slot`; no-op when it is not open.
  void close_slot(std::int32_t slot);
  /// Counts `tokens` as `slot`'s output (its penalties see them).
  void accept_tokens(std::int32_t slot, std::span<const std::int32_t> tokens);
  /// Whether `slot` is open.
  bool is_open(std::int32_t slot) const;

  /// Samples every row of `logits` ([batch.rows.size(), vocab]): fills out.token_ids, the
  /// logprobs of rows that ask, the raw logits of return_logits rows, and counts each sampled or
  /// forced token for its slot. Rows run in parallel on `pool` when given (nullptr: this thread).
  void sample(std::span<const float> logits, const SamplingBatch& batch, cpu::ThreadPool* pool,
              StepOutput& out);

  /// Stages 1-4 (mask, min_tokens, bias, penalties) of `row` over `raw` into `processed`
  /// ([vocab] each), as sample() applies them; for tests and the CUDA sampler's test.
  void process_row(std::span<const float> raw, const SamplingRow& row, const SamplingBatch& batch,
                   std::span<float> processed) const;

  /// Seconds sample() has spent, summed over calls (the benchmark's sampling time).
  double seconds() const { return seconds_; }

 private:
  struct Slot;
  // The open slot of `row`; CHECKs that it is open.
  const Slot& slot_for(const SamplingRow& row) const;
  // Whether stages 1-4 change any logit of `row`: else it samples from the raw row, uncopied.
  static bool needs_processing(const Slot& slot, const SamplingRow& row);
  // Stages 1-4 in place on `l` ([vocab]).
  void apply_processors(const Slot& slot, const SamplingRow& row, const SamplingBatch& batch,
                        std::span<float> l) const;
  // The token of one row that does not return its logits; safe to call from several threads.
  std::int32_t sample_row(std::span<const float> raw, const SamplingRow& row,
                          const SamplingBatch& batch) const;

  std::int64_t vocab_size_;
  std::vector<Slot> slots_;  // by slot index; grown on demand
  double seconds_ = 0.0;
};

/// The token `row` picks from already processed logits (the rules after stage 4 of
/// pagoda/step_sampling.h): the scalar reference of sample()'s fast path.
std::int32_t pick_token_reference(std::span<const float> processed, const SamplingRow& row);

/// Whether each token survives `row`'s top-k, top-p and min-p cut-offs over processed logits
/// (all true when greedy): the reference for tests of the draw's distribution.
std::vector<bool> kept_tokens_reference(std::span<const float> processed, const SamplingRow& row);

}  // namespace pagoda::sampling
