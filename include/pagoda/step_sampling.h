// What a ModelExecutor needs to sample beside the logits, and what comes back: the engine sends
// one SamplingRow per logits row with each step, and the executor returns token ids (and the
// logprobs that were asked for), never a logits matrix, except for rows that ask for their raw
// logits (draft verification). Settings that hold for a request's whole life (penalties, bias,
// min_tokens) travel once, when its slot opens.
//
// Every backend gives the same answer for the same logits (the CPU sampler is the oracle):
//
//   processed logit l'[v] of a row, from the raw logit l[v]:
//     1. allowed mask given and bit v clear              -> -inf
//     2. position < min_tokens and v in min_tokens_banned -> -inf
//     3. l += logit_bias[v]
//     4. repetition != 1 and v in (prompt or output):       l = l > 0 ? l / r : l * r
//        then l -= frequency * count[v] + presence * (count[v] > 0)   (count: output tokens)
//   token:
//     forced_token >= 0                         -> forced_token (no draw)
//     temperature <= 0 or top_k == 1            -> argmax l' (lowest id on ties)
//     otherwise s = l' * (1 / temperature), p = exp(s - max s), and v is kept when
//       top_k:  s[v] >= the k-th largest s (ties at the cut-off all kept)
//       top_p:  p[v] >= the largest t such that the p >= t (of those top_k kept) sum to at least
//               top_p * (their total); so at least the top token stays
//       min_p:  p[v] >= min_p
//     and the token is argmax over kept v of s[v] + gumbel(seed, position, v) (random_draw.h):
//     an exponential race, so each request's draw depends only on its own (seed, position),
//     never on its batch, and a near-tie between backends' rounding is all that can differ.
//   logprobs (num_logprobs >= 0): log_softmax of the RAW logits (vLLM's raw_logprobs): the
//   token's own with its rank, and the num_logprobs best, descending, ties by ascending id.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "pagoda/status.h"

namespace pagoda {

/// A request's sampling settings for its whole life, set when its slot opens on the executor.
/// The executor keeps the penalty state (output token counts) per slot from here on.
struct SlotSamplingConfig {
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  /// (token id, bias), ascending ids, each id once.
  std::vector<std::pair<std::int32_t, float>> logit_bias;
  /// Stop tokens (EOS unless ignore_eos) are banned while the output holds fewer tokens.
  std::int64_t min_tokens = 0;
  std::vector<std::int32_t> min_tokens_banned_ids;
  /// Seen tokens for the repetition penalty (only read when repetition_penalty != 1).
  std::vector<std::int32_t> prompt_token_ids;

  /// Whether any logits processor runs for this slot.
  bool has_processors() const {
    return presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f ||
           !logit_bias.empty() || (min_tokens > 0 && !min_tokens_banned_ids.empty());
  }
  bool has_penalties() const {
    return presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f;
  }
  /// INVALID_ARGUMENT for a token id outside [0, vocab_size) or a biased id listed twice: what
  /// every executor's open_sampling_slot refuses (src/sampling/sampling_rows.cc).
  Status validate(std::int64_t vocab_size) const;
};

/// One logits row's sampling for this step.
struct SamplingRow {
  /// The request's slot (open on the executor); its processors and penalty counts.
  std::int32_t slot = -1;
  /// <= 0: greedy.
  float temperature = 0.0f;
  /// <= 0 or >= vocab: off.
  std::int32_t top_k = 0;
  /// >= 1: off.
  float top_p = 1.0f;
  /// <= 0: off.
  float min_p = 0.0f;
  /// The draw's key: the request's seed and the output index of the token being drawn.
  std::uint64_t seed = 0;
  std::int64_t position = 0;
  /// >= 0: this token is taken without a draw (a reasoning budget closing its span).
  std::int32_t forced_token = -1;
  /// >= 0: return logprobs with this many alternatives (0..20); -1: none.
  std::int32_t num_logprobs = -1;
  /// >= 0: the row's allowed-token bitmask in SamplingBatch::allowed_masks.
  std::int32_t allowed_mask = -1;
  /// Draft verification: no draw and no penalty update; the raw logits come back instead.
  bool return_logits = false;
  /// Prompt scoring (prompt logprobs): forced_token is the prompt's next token, whose logprobs
  /// come back; it is not an output token, so the slot's penalty counts do not learn it.
  bool prompt_row = false;
};

/// Allowed-token masks still being filled while the forward pass runs (structured outputs).
class PendingMasks {
 public:
  virtual ~PendingMasks() = default;
  /// Returns once every mask of the step is written.
  virtual void wait() = 0;
};

/// The rows of one step, aligned with ForwardBatch::logits_indices.
struct SamplingBatch {
  std::vector<SamplingRow> rows;
  /// [num_masks, mask_words(vocab)]: bit v of a row (word v / 32, bit v % 32) allows token v.
  std::vector<std::uint32_t> allowed_masks;
  /// Set while allowed_masks (whose size and row indices are final) are still being written: an
  /// executor starts the forward pass, then calls wait_for_masks() before it reads them.
  PendingMasks* pending_masks = nullptr;

  static std::int64_t mask_words(std::int64_t vocab_size) { return (vocab_size + 31) / 32; }
  void wait_for_masks() const {
    if (pending_masks != nullptr) pending_masks->wait();
  }
  void clear() {
    rows.clear();
    allowed_masks.clear();
    pending_masks = nullptr;
  }
};

/// The sampled token's log-probability and rank, and the most likely alternatives.
struct SampledLogprobs {
  std::int32_t token_id = 0;
  float logprob = 0.0f;
  /// 1 + the number of tokens strictly more likely (vLLM's rank).
  std::int64_t rank = 0;
  /// The most likely tokens, descending (ties by ascending id).
  std::vector<std::pair<std::int32_t, float>> top;
};

/// What execute() returns, aligned with SamplingBatch::rows. Vectors keep their capacity.
struct StepOutput {
  /// [num_rows]; -1 for return_logits rows.
  std::vector<std::int32_t> token_ids;
  /// [num_rows]; meaningful where the row's num_logprobs >= 0.
  std::vector<SampledLogprobs> logprobs;
  /// Raw logits of the return_logits rows, in row order, [num_returned, vocab].
  std::vector<float> returned_logits;
  /// [num_rows]: the row's index in returned_logits, or -1.
  std::vector<std::int32_t> returned_row;
  std::int64_t vocab_size = 0;

  /// Row i's raw logits; CHECK-free: empty when it did not ask for them.
  std::span<const float> logits(std::size_t i) const {
    if (i >= returned_row.size() || returned_row[i] < 0) return {};
    return {returned_logits.data() +
                static_cast<std::size_t>(returned_row[i]) * static_cast<std::size_t>(vocab_size),
            static_cast<std::size_t>(vocab_size)};
  }
};

}  // namespace pagoda
