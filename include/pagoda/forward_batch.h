// One forward pass over a batch of sequences, in the scheduler's words: which tokens run, where
// each sits in its sequence, where its K/V goes in the paged cache and which rows need logits.
// The runner fills it from the scheduler's decisions; a ModelExecutor (CPU or CUDA) consumes it.
#pragma once

#include <cstdint>
#include <vector>

namespace pagoda {

/// Overlapped steps: an input token the host does not know yet, because the step that samples it
/// was launched but not collected when this one was planned. The executor takes it from the
/// sampled tokens of the step launched just before this one (ModelExecutor::launch_step).
struct PreviousToken {
  std::int32_t token_row = 0;     ///< Row of ForwardBatch::token_ids to fill.
  std::int32_t previous_row = 0;  ///< Row of the previous step's SamplingBatch (and StepOutput).
};
// Laid out as the [num, 2] int32 pairs a device gather kernel reads.
static_assert(sizeof(PreviousToken) == 2 * sizeof(std::int32_t));

/// The flattened tokens of every scheduled sequence and the paged-cache bookkeeping they need.
/// Vectors keep their capacity when a runner refills the same ForwardBatch each step.
///
/// Example: seq 0 prefills 3 new tokens (chunk of a longer prompt, 2 already cached), seq 1
/// decodes 1 token (5 cached). block_size = 4.
///
///   token row          0     1     2  |  3
///   token_ids          a     b     c  |  x
///   positions          2     3     4  |  5          position of the token inside its sequence
///   query_start_loc  [ 0,                 3,  4 ]   seq s owns rows [qsl[s], qsl[s+1])
///   seq_lens         [ 5,                 6 ]       tokens in cache AFTER this step
///   block_tables     [[7, 2, -], [4, 9, -]]         [num_seqs, max_blocks_per_seq]
///   slot_mapping       30    31    8  |  37         block_tables[s][p / bs] * bs + p % bs
///   logits_indices   [ 2, 3 ]                       rows whose logits come back, in order
///
/// With overlapped steps, seq 1's input x may still be in flight (sampled by the previous step,
/// not yet on the host): token_ids[3] then holds kTokenInFlight and from_previous_step names
/// {3, row of seq 1 in the previous step's sampling}.
///
/// Invariants: each sequence's new tokens are its last (seq_len - q_len .. seq_len - 1)
/// positions, contiguous; slot_mapping < 0 marks a padding row whose K/V is not stored.
///
/// Models with sliding-window layers (ModelExecutorInfo::kv_group_windows) may carry one more
/// table and slot mapping per KV group g >= 1 in kv_groups[g - 1], same shapes. A sliding group's
/// table is indexed like block_tables, by absolute position / block_size, but holds only the
/// blocks its window can still see: entries below the first key of the sequence's first query,
/// block (q_start - window + 1) / block_size, are -1 and never read (the window excludes them).
/// window 4, block_size 4, seq 0 at positions 9..10 (first key 6):
///
///   block_tables        [ 7,  2,  5]      group 0 (full layers): every block
///   kv_groups[0] table  [-1, 12,  3]      sliding layers: block 0 (positions 0..3) freed
///   slot_mapping        21 22             5 * 4 + 1, 5 * 4 + 2
///   kv_groups[0] slots  13 14             3 * 4 + 1, 3 * 4 + 2
///
/// Without kv_groups every layer uses block_tables and slot_mapping (one table for all layers).
struct ForwardBatch {
  /// One KV group's block tables and slot mapping (groups after the first).
  struct KvGroupTables {
    std::vector<std::int32_t> block_tables;  ///< [num_seqs, max_blocks_per_seq], -1 where freed.
    std::vector<std::int64_t> slot_mapping;  ///< [num_tokens], in this group's pool.
  };

  std::vector<std::int32_t> token_ids;        ///< [num_tokens]
  std::vector<std::int32_t> positions;        ///< [num_tokens]
  std::vector<std::int32_t> query_start_loc;  ///< [num_seqs + 1], starts at 0, non-decreasing.
  std::vector<std::int32_t> seq_lens;         ///< [num_seqs], cached tokens after this step.
  std::vector<std::int32_t> block_tables;     ///< [num_seqs, max_blocks_per_seq], row-major.
  std::int64_t max_blocks_per_seq = 0;        ///< Columns of block_tables.
  std::vector<std::int64_t> slot_mapping;     ///< [num_tokens], KV slot of each token.
  std::vector<std::int32_t> logits_indices;   ///< [num_logits], token rows that need logits.
  /// Rows whose id comes from the previous launched step's samples (launch_step resolves them;
  /// forward() and execute() take batches where this is empty).
  std::vector<PreviousToken> from_previous_step;
  /// KV groups 1.. of a model with sliding-window layers; empty: every layer uses group 0's.
  std::vector<KvGroupTables> kv_groups;

  /// What token_ids holds at a row listed in from_previous_step: a valid id, so batch checks
  /// pass, that the executor overwrites before the embedding reads it.
  static constexpr std::int32_t kTokenInFlight = 0;

  /// Tokens in the batch.
  std::int64_t num_tokens() const { return static_cast<std::int64_t>(token_ids.size()); }
  /// Sequences in the batch.
  std::int64_t num_seqs() const { return static_cast<std::int64_t>(seq_lens.size()); }
  /// Rows of logits forward() writes.
  std::int64_t num_logits() const { return static_cast<std::int64_t>(logits_indices.size()); }

  /// Empties every field, keeping capacity.
  void clear() {
    token_ids.clear();
    positions.clear();
    query_start_loc.clear();
    seq_lens.clear();
    block_tables.clear();
    max_blocks_per_seq = 0;
    slot_mapping.clear();
    logits_indices.clear();
    from_previous_step.clear();
    for (KvGroupTables& group : kv_groups) {
      group.block_tables.clear();
      group.slot_mapping.clear();
    }
  }
};

}  // namespace pagoda
