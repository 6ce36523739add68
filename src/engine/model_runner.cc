#include "engine/model_runner.h"

#include <algorithm>
#include <utility>

#include "common/check.h"

namespace pagoda::engine {

ModelRunner::ModelRunner(ModelExecutor& executor, std::int64_t block_size,
                         std::vector<std::int64_t> sliding_windows)
    : executor_(executor), block_size_(block_size), sliding_windows_(std::move(sliding_windows)) {
  PAGODA_CHECK(block_size_ > 0) << "block_size " << block_size_;
  batch_.kv_groups.resize(sliding_windows_.size());
}

void ModelRunner::prepare(const SchedulerOutput& output) {
  update_states(output);
  prepare_batch(output);
}

std::span<SamplingRow> ModelRunner::rows_for(std::size_t i) {
  PAGODA_CHECK_LT(i, first_row_.size());
  if (first_row_[i] < 0) return {};
  return std::span(sampling_.rows)
      .subspan(static_cast<std::size_t>(first_row_[i]), static_cast<std::size_t>(num_rows_[i]));
}

Status ModelRunner::run() {
  if (batch_.num_tokens() == 0) return Status::ok_status();
  return executor_.execute(batch_, sampling_, step_output_);
}

Status ModelRunner::launch(bool* launched) {
  *launched = batch_.num_tokens() > 0;
  if (!*launched) return Status::ok_status();
  return executor_.launch_step(batch_, sampling_);
}

const std::vector<std::int32_t>* ModelRunner::block_table(std::int32_t slot) const {
  if (slot < 0 || static_cast<std::size_t>(slot) >= states_.size()) return nullptr;
  const RequestState& s = states_[static_cast<std::size_t>(slot)];
  return s.live ? &s.block_table : nullptr;
}

ModelRunner::RequestState& ModelRunner::state(std::int32_t slot) {
  PAGODA_CHECK(slot >= 0) << "a scheduled request without a slot";
  if (static_cast<std::size_t>(slot) >= states_.size()) states_.resize(slot + 1);
  return states_[static_cast<std::size_t>(slot)];
}

void ModelRunner::score_prompt(std::int32_t slot, std::vector<std::int32_t> prompt_token_ids,
                               std::int32_t num_logprobs) {
  PAGODA_CHECK(slot >= 0 && num_logprobs >= 0) << "slot " << slot << ", " << num_logprobs;
  if (static_cast<std::size_t>(slot) >= scoring_.size()) scoring_.resize(slot + 1);
  scoring_[static_cast<std::size_t>(slot)] = {
      .prompt = std::move(prompt_token_ids), .num_logprobs = num_logprobs, .next_token = 1};
}

void ModelRunner::clear_prompt_scoring(std::int32_t slot) {
  if (slot >= 0 && static_cast<std::size_t>(slot) < scoring_.size()) {
    scoring_[static_cast<std::size_t>(slot)] = {};
  }
}

void ModelRunner::drop(std::int32_t slot) {
  if (slot < 0 || static_cast<std::size_t>(slot) >= states_.size()) return;
  RequestState& s = states_[static_cast<std::size_t>(slot)];
  if (!s.live) return;
  s.live = false;
  s.block_table.clear();
  for (std::vector<std::int32_t>& table : s.group_tables) table.clear();
  --num_live_;
}

void ModelRunner::update_states(const SchedulerOutput& output) {
  // Drops come first: a slot freed earlier may come back as a new request.
  for (const std::int32_t slot : output.finished_slots) drop(slot);
  for (const std::int32_t slot : output.preempted_slots) drop(slot);
  for (const ScheduledRequest& s : output.requests) {
    RequestState& state = this->state(s.slot);
    PAGODA_CHECK_EQ(s.group_block_ids.size(), sliding_windows_.size())
        << s.request_id << ": block tables for another number of KV groups";
    state.group_tables.resize(sliding_windows_.size());
    for (std::size_t g = 0; g < sliding_windows_.size(); ++g) {
      std::vector<std::int32_t>& table = state.group_tables[g];
      if (s.is_new) table.clear();
      table.insert(table.end(), s.group_block_ids[g].begin(), s.group_block_ids[g].end());
    }
    if (s.is_new) {
      if (!state.live) ++num_live_;
      state.live = true;
      state.block_table = s.block_ids;
      state.num_computed_tokens = s.num_computed_tokens;
      state.num_spec_tokens = 0;
      state.last_sample_row = -1;
    } else {
      PAGODA_CHECK(state.live) << s.request_id << " is running but the runner lost it";
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
//                    request with k drafts its last k + 1 rows (verification scores each).
//                    A request scoring its prompt first gets a row for every prefill token
//                    whose next token is still a prompt token not yet scored (prompt_rows()):
//                    chunked prefill scores each chunk's positions in the step that runs it.
void ModelRunner::prepare_batch(const SchedulerOutput& output) {
  batch_.clear();
  sampling_.clear();
  prompt_rows_.clear();
  first_row_.assign(output.requests.size(), -1);
  num_rows_.assign(output.requests.size(), 0);
  std::int64_t max_blocks = 0;
  for (const ScheduledRequest& s : output.requests) {
    max_blocks = std::max<std::int64_t>(
        max_blocks, static_cast<std::int64_t>(state(s.slot).block_table.size()));
  }
  batch_.max_blocks_per_seq = max_blocks;
  batch_.query_start_loc.push_back(0);
  for (std::size_t i = 0; i < output.requests.size(); ++i) {
    const ScheduledRequest& s = output.requests[i];
    RequestState& state = this->state(s.slot);
    const std::vector<std::int32_t>& table = state.block_table;
    const std::int64_t start = s.num_computed_tokens;
    const std::int64_t seq_len = start + s.num_scheduled_tokens();
    PAGODA_CHECK_LE(seq_len, static_cast<std::int64_t>(table.size()) * block_size_)
        << s.request_id << ": block table too short for its tokens";
    if (s.last_token_in_flight) {
      // Sampled by the previous launched step, which sampled for it at state.last_sample_row.
      PAGODA_CHECK(state.last_sample_row >= 0 && state.last_sample_batch == num_batches_)
          << s.request_id << ": its input is in flight but the last step did not sample for it";
      batch_.from_previous_step.push_back({.token_row = static_cast<std::int32_t>(
                                               batch_.num_tokens() + s.num_scheduled_tokens() - 1),
                                           .previous_row = state.last_sample_row});
    }
    state.last_sample_row = -1;
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
    add_group_tables(state, start, s.num_scheduled_tokens(), max_blocks);
    add_prompt_rows(i, s, batch_.num_tokens() - s.num_scheduled_tokens());
    if (s.needs_sample) {
      first_row_[i] = static_cast<std::int32_t>(batch_.num_logits());
      num_rows_[i] = static_cast<std::int32_t>(1 + s.num_spec_tokens);
      state.last_sample_row = first_row_[i];
      state.last_sample_batch = num_batches_ + 1;
      for (std::int64_t r = s.num_spec_tokens; r >= 0; --r) {
        batch_.logits_indices.push_back(static_cast<std::int32_t>(batch_.num_tokens() - 1 - r));
        sampling_.rows.push_back({.slot = s.slot});
      }
    }
    state.num_computed_tokens = seq_len - s.num_spec_tokens;
    state.num_spec_tokens = s.num_spec_tokens;
  }
  if (batch_.num_tokens() > 0) ++num_batches_;
}

// A sliding group's table goes to the batch as kept: entries below the window of the first
// query (position `start`) are -1 there, whether or not the scheduler has freed them yet, so a
// block that may already belong to another request is never named.
void ModelRunner::add_group_tables(const RequestState& state, std::int64_t start,
                                   std::int64_t num_tokens, std::int64_t max_blocks) {
  for (std::size_t g = 0; g < sliding_windows_.size(); ++g) {
    const std::vector<std::int32_t>& table = state.group_tables[g];
    PAGODA_CHECK_EQ(table.size(), state.block_table.size()) << "KV group tables out of step";
    ForwardBatch::KvGroupTables& out = batch_.kv_groups[g];
    const std::int64_t first =
        std::max<std::int64_t>(0, start - sliding_windows_[g] + 1) / block_size_;
    out.block_tables.resize(out.block_tables.size() + static_cast<std::size_t>(first), -1);
    out.block_tables.insert(out.block_tables.end(), table.begin() + first, table.end());
    out.block_tables.resize(out.block_tables.size() + (max_blocks - table.size()), -1);
    for (std::int64_t pos = start; pos < start + num_tokens; ++pos) {
      const std::int32_t block = table[static_cast<std::size_t>(pos / block_size_)];
      PAGODA_CHECK(block >= 0) << "position " << pos << " has no block in KV group " << g + 1;
      out.slot_mapping.push_back(std::int64_t{block} * block_size_ + pos % block_size_);
    }
  }
}

// Token row first_token_row + t holds position start + t; its logits score prompt token
// start + t + 1 when that is a prompt token not scored yet.
void ModelRunner::add_prompt_rows(std::size_t i, const ScheduledRequest& s,
                                  std::int64_t first_token_row) {
  if (static_cast<std::size_t>(s.slot) >= scoring_.size()) return;
  PromptScoring& p = scoring_[static_cast<std::size_t>(s.slot)];
  const auto prompt_len = static_cast<std::int64_t>(p.prompt.size());
  if (p.num_logprobs < 0 || p.next_token >= prompt_len) return;
  const std::int64_t start = s.num_computed_tokens;
  const std::int64_t end = std::min(start + s.num_scheduled_tokens() - s.num_spec_tokens,
                                    prompt_len - 1);  // last position whose next is a prompt token
  const std::int64_t from = std::max(start, p.next_token - 1);
  if (from >= end) return;
  PromptRows rows{.request = i,
                  .slot = s.slot,
                  .first_row = static_cast<std::int32_t>(batch_.num_logits()),
                  .num_rows = static_cast<std::int32_t>(end - from),
                  .first_token = from + 1};
  for (std::int64_t pos = from; pos < end; ++pos) {
    batch_.logits_indices.push_back(static_cast<std::int32_t>(first_token_row + pos - start));
    sampling_.rows.push_back({.slot = s.slot,
                              .forced_token = p.prompt[static_cast<std::size_t>(pos + 1)],
                              .num_logprobs = p.num_logprobs,
                              .prompt_row = true});
  }
  p.next_token = end + 1;
  prompt_rows_.push_back(rows);
}

}  // namespace pagoda::engine
