#include "engine/model_runner.h"

#include <algorithm>
#include <utility>

#include "common/check.h"

namespace pagoda::engine {

ModelRunner::ModelRunner(ModelExecutor& executor, std::int64_t block_size)
    : executor_(executor), block_size_(block_size), vocab_size_(executor.info().vocab_size) {
  PAGODA_CHECK(block_size_ > 0) << "block_size " << block_size_;
}

Status ModelRunner::execute(const SchedulerOutput& output) {
  update_states(output);
  prepare_batch(output);
  if (output.empty()) return Status::ok_status();
  logits_.resize(static_cast<std::size_t>(batch_.num_logits() * vocab_size_));
  return executor_.forward(batch_, logits_.data());
}

std::span<const float> ModelRunner::logits_for(std::size_t i) const {
  PAGODA_CHECK_LT(i, logits_row_.size());
  const std::int32_t row = logits_row_[i];
  if (row < 0) return {};
  return std::span(logits_).subspan(static_cast<std::size_t>(row * vocab_size_),
                                    static_cast<std::size_t>(logits_rows_[i] * vocab_size_));
}

const std::vector<std::int32_t>* ModelRunner::block_table(std::string_view request_id) const {
  const auto it = states_.find(request_id);
  return it == states_.end() ? nullptr : &it->second.block_table;
}

void ModelRunner::update_states(const SchedulerOutput& output) {
  // Drops come first: a request preempted or finished earlier may come back as new.
  for (const std::string& id : output.finished_request_ids) {
    if (const auto it = states_.find(id); it != states_.end()) states_.erase(it);
  }
  for (const std::string& id : output.preempted_request_ids) {
    if (const auto it = states_.find(id); it != states_.end()) states_.erase(it);
  }
  for (const ScheduledRequest& s : output.requests) {
    if (s.is_new) {
      RequestState& state = states_[s.request_id];
      state.block_table = s.block_ids;
      state.num_computed_tokens = s.num_computed_tokens;
    } else {
      const auto it = states_.find(s.request_id);
      PAGODA_CHECK(it != states_.end()) << s.request_id << " is running but the runner lost it";
      RequestState& state = it->second;
      PAGODA_CHECK(s.num_computed_tokens >= state.num_computed_tokens &&
                   s.num_computed_tokens <= state.num_computed_tokens + state.num_spec_tokens)
          << s.request_id << ": the step starts at " << s.num_computed_tokens
          << " but the last one ended at " << state.num_computed_tokens << " + "
          << state.num_spec_tokens << " drafts";
      state.block_table.insert(state.block_table.end(), s.block_ids.begin(), s.block_ids.end());
    }
  }
}

// One row per token; sequence s owns rows [query_start_loc[s], query_start_loc[s+1]):
//
//   requests         A (prefill chunk, 3 tokens)  |  B (decode, 1 token)
//   positions        nA  nA+1 nA+2                |  nB                 n = num_computed_tokens
//   slot_mapping     table_A[p / bs] * bs + p % bs, per token
//   block_tables     [num_seqs, max_blocks], rows padded with -1 past each table's end
//   logits_indices   last row of each request that needs a sample, in request order; for a
//                    request with k drafts its last k + 1 rows (verification scores each)
void ModelRunner::prepare_batch(const SchedulerOutput& output) {
  batch_.clear();
  logits_row_.assign(output.requests.size(), -1);
  logits_rows_.assign(output.requests.size(), 0);
  std::int64_t max_blocks = 0;
  for (const ScheduledRequest& s : output.requests) {
    max_blocks = std::max<std::int64_t>(
        max_blocks, static_cast<std::int64_t>(states_.at(s.request_id).block_table.size()));
  }
  batch_.max_blocks_per_seq = max_blocks;
  batch_.query_start_loc.push_back(0);
  for (std::size_t i = 0; i < output.requests.size(); ++i) {
    const ScheduledRequest& s = output.requests[i];
    RequestState& state = states_.at(s.request_id);
    const std::vector<std::int32_t>& table = state.block_table;
    const std::int64_t start = s.num_computed_tokens;
    const std::int64_t seq_len = start + s.num_scheduled_tokens();
    PAGODA_CHECK_LE(seq_len, static_cast<std::int64_t>(table.size()) * block_size_)
        << s.request_id << ": block table too short for its tokens";
    for (std::int64_t t = 0; t < s.num_scheduled_tokens(); ++t) {
      const std::int64_t pos = start + t;
      batch_.token_ids.push_back(s.token_ids[static_cast<std::size_t>(t)]);
      batch_.positions.push_back(static_cast<std::int32_t>(pos));
      batch_.slot_mapping.push_back(
          std::int64_t{table[static_cast<std::size_t>(pos / block_size_)]} * block_size_ +
          pos % block_size_);
    }
    batch_.query_start_loc.push_back(static_cast<std::int32_t>(batch_.num_tokens()));
    batch_.seq_lens.push_back(static_cast<std::int32_t>(seq_len));
    batch_.block_tables.insert(batch_.block_tables.end(), table.begin(), table.end());
    batch_.block_tables.resize(batch_.block_tables.size() + (max_blocks - table.size()), -1);
    if (s.needs_sample) {
      logits_row_[i] = static_cast<std::int32_t>(batch_.num_logits());
      logits_rows_[i] = static_cast<std::int32_t>(1 + s.num_spec_tokens);
      for (std::int64_t r = s.num_spec_tokens; r >= 0; --r) {
        batch_.logits_indices.push_back(static_cast<std::int32_t>(batch_.num_tokens() - 1 - r));
      }
    }
    state.num_computed_tokens = seq_len - s.num_spec_tokens;
    state.num_spec_tokens = s.num_spec_tokens;
  }
}

}  // namespace pagoda::engine
