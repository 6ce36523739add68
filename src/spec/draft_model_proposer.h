// A small model with the target's vocabulary drafts k tokens per request, autoregressively and
// batched across requests, on its own executor and its own paged KV cache:
//
//   request tokens   t0 ... t[n-1]                     (prompt + output, as the target has it)
//   draft cache      t0 ... t[c-1]                      c = common prefix with what it holds
//   pass 0           feed t[c..n-1] (chunked by the executor's budget) -> logits -> d1 ~ q1
//   pass j = 1..k-1  feed d_j at position n - 1 + j                     -> logits -> d(j+1) ~
//   q(j+1)
//
// After a verification the request's tokens share a prefix with what the draft cached (its
// accepted drafts), so the next pass 0 only feeds the difference: rejected drafts roll back by
// being overwritten, as in the target's cache. Under greedy sampling d_j = argmax (no q); else
// d_j is drawn from q_j = softmax(logits / temperature) over the whole vocabulary with the
// request's own seeded generator, and q_j is returned for the rejection rule. Each request's
// cache state sits at its slot; remove() gives its blocks back when the engine frees the slot.
//
// A draft with sliding-window layers keeps them in KV groups (docs/kv_cache_groups.md), as
// SingleSequenceBatcher does: the pool's blocks are pages of a group's layers, group 0's table
// holds every block of the sequence, and each sliding group a ring of R = ceil((budget + window -
// 1) / bs) + 1 blocks per request (budget: the most tokens one forward pass carries), block i of
// the sequence living in ring block i % R. A pass never reaches further back than its first
// query's window, and the next proposal starts no earlier than this one's request length (the
// request's tokens only grow), so R blocks hold every key a pass reads, the rolled-back drafts'
// included; a failed pass, which starts the next one at 0, simply rewrites the ring.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "pagoda/forward_batch.h"
#include "pagoda/model_executor.h"
#include "pagoda/status.h"
#include "spec/proposer.h"

namespace pagoda::spec {

/// The draft model and its cache.
class DraftModelProposer final : public Proposer {
 public:
  /// Allocates `num_blocks` KV blocks of `block_size` tokens on `executor`: pages shared by its
  /// KV groups when the draft has sliding-window layers, unless `single_table`
  /// (--disable-hybrid-kv-cache-manager), else one pool per layer. INVALID_ARGUMENT when its
  /// vocabulary differs from `target_vocab_size` (they must share the tokenizer).
  static StatusOr<std::unique_ptr<DraftModelProposer>> create(
      std::shared_ptr<ModelExecutor> executor, std::int64_t target_vocab_size,
      std::int64_t block_size, std::int64_t num_blocks, bool single_table = false);

  void propose(std::span<const ProposalRequest> requests,
               std::vector<Proposal>& proposals) override;
  void remove(std::int32_t slot) override;

  /// Blocks not held by any request (tests check that nothing leaks).
  std::int64_t num_free_blocks() const { return static_cast<std::int64_t>(free_blocks_.size()); }
  /// The sliding windows of KV groups 1.. (empty with one table for every layer).
  const std::vector<std::int64_t>& sliding_windows() const { return sliding_windows_; }
  /// Each sliding group's ring, in blocks per request.
  const std::vector<std::int64_t>& ring_blocks() const { return ring_blocks_; }
  /// Whether the request at `slot` has draft state (tests check a freed slot starts clean).
  bool has_state(std::int32_t slot) const {
    return slot >= 0 && static_cast<std::size_t>(slot) < states_.size() &&
           states_[static_cast<std::size_t>(slot)].has_value();
  }

 private:
  struct RequestState {
    std::vector<std::int32_t> cached;       // tokens whose K/V the draft cache holds, by position
    std::vector<std::int32_t> block_table;  // group 0's: every block of the sequence
    std::vector<std::vector<std::int32_t>> rings;  // per sliding group, up to ring_blocks_[g]
    std::mt19937_64 rng;
  };
  // One sequence's share of a pass: `tokens` at positions `start` onward; logits of the last.
  struct Feed {
    RequestState* state;
    std::vector<std::int32_t> tokens;
    std::int64_t start;
    std::size_t row;  // row of logits_ this feed's last token fills
  };
  DraftModelProposer(std::shared_ptr<ModelExecutor> executor, std::int64_t block_size,
                     std::int64_t num_blocks, std::vector<std::int64_t> sliding_windows);
  bool reserve(RequestState& state, std::int64_t num_tokens);
  Status run(std::vector<Feed>& feeds);
  std::int32_t draw(std::span<const float> logits, const SamplingParams& sampling,
                    std::mt19937_64& rng, std::vector<float>& probs);

  std::shared_ptr<ModelExecutor> executor_;
  std::int64_t block_size_;
  std::int64_t vocab_size_;
  std::vector<std::int64_t> sliding_windows_;
  std::vector<std::int64_t> ring_blocks_;  // per sliding group
  std::vector<std::int32_t> free_blocks_;
  std::vector<std::optional<RequestState>> states_;  // by slot, grown on demand
  ForwardBatch batch_;
  std::vector<float> batch_logits_;  // [rows of one forward, vocab]
  std::vector<float> logits_;        // [requests of the step, vocab]
};

}  // namespace pagoda::spec
