#include "models/forward_batch_check.h"

#include <algorithm>
#include <string>

namespace pagoda::models {

namespace {

Status bad(const std::string& message) {
  return invalid_argument("forward batch: " + message);
}

std::string str(std::int64_t value) {
  return std::to_string(value);
}

Status check_sizes(const ForwardBatch& b, const ForwardBatchLimits& limits) {
  const std::int64_t n = b.num_tokens();
  if (n == 0) return bad("no tokens");
  if (n > limits.max_num_batched_tokens) {
    return bad(str(n) + " tokens, more than max_num_batched_tokens " +
               str(limits.max_num_batched_tokens));
  }
  if (static_cast<std::int64_t>(b.positions.size()) != n ||
      static_cast<std::int64_t>(b.slot_mapping.size()) != n) {
    return bad("positions and slot_mapping must have one entry per token");
  }
  if (static_cast<std::int64_t>(b.query_start_loc.size()) != b.num_seqs() + 1) {
    return bad("query_start_loc must have num_seqs + 1 entries");
  }
  if (b.max_blocks_per_seq <= 0 ||
      static_cast<std::int64_t>(b.block_tables.size()) != b.num_seqs() * b.max_blocks_per_seq) {
    return bad("block_tables must be [num_seqs, max_blocks_per_seq]");
  }
  return Status::ok_status();
}

// Sequence s: rows [qsl[s], qsl[s+1]) are its last q_len positions, seq_len - q_len .. seq_len-1,
// and each lives at the slot its block table gives.
Status check_sequence(const ForwardBatch& b, const ForwardBatchLimits& limits, std::int64_t s) {
  const std::int64_t begin = b.query_start_loc[s];
  const std::int64_t end = b.query_start_loc[s + 1];
  const std::int64_t seq_len = b.seq_lens[s];
  if (begin < 0 || end < begin || end > b.num_tokens()) {
    return bad("query_start_loc of sequence " + str(s) + " is out of order or range");
  }
  if (seq_len < end - begin || seq_len > limits.max_model_len) {
    return bad("seq_lens[" + str(s) + "] = " + str(seq_len) + " is not in [q_len, max_model_len " +
               str(limits.max_model_len) + "]");
  }
  const std::int64_t needed_blocks = (seq_len + limits.block_size - 1) / limits.block_size;
  if (needed_blocks > b.max_blocks_per_seq)
    return bad("block table of sequence " + str(s) + " is too short");
  const std::int32_t* table = b.block_tables.data() + s * b.max_blocks_per_seq;
  for (std::int64_t i = 0; i < needed_blocks; ++i) {
    if (table[i] < 0 || table[i] >= limits.num_blocks) {
      return bad("block " + str(table[i]) + " of sequence " + str(s) + " is not in the pool of " +
                 str(limits.num_blocks));
    }
  }
  for (std::int64_t t = begin; t < end; ++t) {
    const std::int64_t position = seq_len - (end - t);
    if (b.positions[t] != position) {
      return bad("token " + str(t) + " has position " + str(b.positions[t]) + ", expected " +
                 str(position));
    }
    const std::int64_t slot = b.slot_mapping[t];
    const std::int64_t expected =
        std::int64_t{table[position / limits.block_size]} * limits.block_size +
        position % limits.block_size;
    if (slot >= 0 && slot != expected) {
      return bad("token " + str(t) + " has slot " + str(slot) + ", its block table says " +
                 str(expected));
    }
  }
  return Status::ok_status();
}

// A sliding group's table must name a block of its pool from the first query's window on
// (earlier entries are never read), and its slots must follow the table.
Status check_group(const ForwardBatch& b, const ForwardBatchLimits& limits, std::size_t g) {
  const ForwardBatch::KvGroupTables& group = b.kv_groups[g];
  const std::int64_t window = limits.group_windows[g];
  const std::int64_t num_blocks = limits.num_blocks;
  if (static_cast<std::int64_t>(group.block_tables.size()) != b.num_seqs() * b.max_blocks_per_seq ||
      static_cast<std::int64_t>(group.slot_mapping.size()) != b.num_tokens()) {
    return bad("KV group " + str(static_cast<std::int64_t>(g) + 1) +
               " must have block_tables' and slot_mapping's shapes");
  }
  const std::int64_t bs = limits.block_size;
  for (std::int64_t s = 0; s < b.num_seqs(); ++s) {
    const std::int64_t q_len = b.query_start_loc[s + 1] - b.query_start_loc[s];
    const std::int64_t first_query = b.seq_lens[s] - q_len;
    const std::int64_t first = std::max<std::int64_t>(0, first_query - window + 1) / bs;
    const std::int32_t* table = group.block_tables.data() + s * b.max_blocks_per_seq;
    for (std::int64_t i = first; i < (b.seq_lens[s] + bs - 1) / bs; ++i) {
      if (table[i] < 0 || table[i] >= num_blocks) {
        return bad("block " + str(table[i]) + " of sequence " + str(s) + " in KV group " +
                   str(static_cast<std::int64_t>(g) + 1) + " is not in its pool of " +
                   str(num_blocks));
      }
    }
    for (std::int64_t t = b.query_start_loc[s]; t < b.query_start_loc[s + 1]; ++t) {
      const std::int64_t position = b.positions[t];
      const std::int64_t expected = std::int64_t{table[position / bs]} * bs + position % bs;
      if (group.slot_mapping[t] >= 0 && group.slot_mapping[t] != expected) {
        return bad("token " + str(t) + " has slot " + str(group.slot_mapping[t]) + " in KV group " +
                   str(static_cast<std::int64_t>(g) + 1) + ", its block table says " +
                   str(expected));
      }
    }
  }
  return Status::ok_status();
}

}  // namespace

Status check_forward_batch(const ForwardBatch& b, const ForwardBatchLimits& limits) {
  PAGODA_RETURN_IF_ERROR(check_sizes(b, limits));
  if (b.query_start_loc[0] != 0 || b.query_start_loc[b.num_seqs()] != b.num_tokens()) {
    return bad("query_start_loc must run from 0 to num_tokens");
  }
  for (std::int64_t s = 0; s < b.num_seqs(); ++s) {
    PAGODA_RETURN_IF_ERROR(check_sequence(b, limits, s));
  }
  if (!b.kv_groups.empty()) {
    if (b.kv_groups.size() != limits.group_windows.size()) {
      return bad(str(static_cast<std::int64_t>(b.kv_groups.size()) + 1) +
                 " KV groups' tables for an executor of " +
                 str(static_cast<std::int64_t>(limits.group_windows.size()) + 1));
    }
    for (std::size_t g = 0; g < b.kv_groups.size(); ++g) {
      PAGODA_RETURN_IF_ERROR(check_group(b, limits, g));
    }
  }
  for (std::int32_t id : b.token_ids) {
    if (id < 0 || id >= limits.vocab_size) {
      return bad("token id " + str(id) + " is not in [0, " + str(limits.vocab_size) + ")");
    }
  }
  if (b.num_logits() > b.num_tokens()) return bad("more logits rows than tokens");
  for (std::int32_t row : b.logits_indices) {
    if (row < 0 || row >= b.num_tokens()) {
      return bad("logits index " + str(row) + " is not a token row");
    }
  }
  return Status::ok_status();
}

}  // namespace pagoda::models
