#include "spec/draft_model_proposer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/check.h"

namespace pagoda::spec {
namespace {

// Keeps a seeded request's draft draws apart from its target sampler's and verifier's streams.
constexpr std::uint64_t kDraftStreamOffset = 0xD1B54A32D192ED03ULL;

std::uint64_t draft_seed(const SamplingParams& params) {
  if (params.seed) return *params.seed ^ kDraftStreamOffset;
  std::random_device device;
  return (std::uint64_t{device()} << 32) ^ device();
}

}  // namespace

StatusOr<std::unique_ptr<DraftModelProposer>> DraftModelProposer::create(
    std::shared_ptr<ModelExecutor> executor, std::int64_t target_vocab_size,
    std::int64_t block_size, std::int64_t num_blocks, bool single_table) {
  PAGODA_CHECK(executor != nullptr) << "no draft executor";
  const std::int64_t vocab = executor->info().vocab_size;
  if (vocab != target_vocab_size) {
    return invalid_argument("--speculative-config: the draft model's vocabulary has " +
                            std::to_string(vocab) + " tokens but the target's has " +
                            std::to_string(target_vocab_size) +
                            "; the draft must share the target's tokenizer");
  }
  const ModelExecutorInfo& info = executor->info();
  std::vector<std::int64_t> sliding_windows;
  if (!single_table && info.num_kv_groups() > 1) {
    sliding_windows.assign(info.kv_group_windows.begin() + 1, info.kv_group_windows.end());
    PAGODA_RETURN_IF_ERROR(executor->allocate_kv_cache_groups(num_blocks, block_size));
  } else {
    PAGODA_RETURN_IF_ERROR(executor->allocate_kv_cache(num_blocks, block_size));
  }
  return std::unique_ptr<DraftModelProposer>(new DraftModelProposer(
      std::move(executor), block_size, num_blocks, std::move(sliding_windows)));
}

DraftModelProposer::DraftModelProposer(std::shared_ptr<ModelExecutor> executor,
                                       std::int64_t block_size, std::int64_t num_blocks,
                                       std::vector<std::int64_t> sliding_windows)
    : executor_(std::move(executor)),
      block_size_(block_size),
      vocab_size_(executor_->info().vocab_size),
      sliding_windows_(std::move(sliding_windows)) {
  const std::int64_t budget = executor_->info().max_num_batched_tokens;
  for (const std::int64_t window : sliding_windows_) {
    ring_blocks_.push_back((budget + window - 1 + block_size - 1) / block_size + 1);
  }
  // Highest id last out, so blocks are handed out from 0 upward.
  for (std::int64_t b = num_blocks; b-- > 0;) free_blocks_.push_back(static_cast<std::int32_t>(b));
}

void DraftModelProposer::remove(std::int32_t slot) {
  if (!has_state(slot)) return;
  std::optional<RequestState>& state = states_[static_cast<std::size_t>(slot)];
  free_blocks_.insert(free_blocks_.end(), state->block_table.rbegin(), state->block_table.rend());
  for (const std::vector<std::int32_t>& ring : state->rings) {
    free_blocks_.insert(free_blocks_.end(), ring.rbegin(), ring.rend());
  }
  state.reset();
}

// Grows group 0's table to hold `num_tokens` and each sliding group's ring towards its size;
// false (nothing taken) when the pool is short.
bool DraftModelProposer::reserve(RequestState& state, std::int64_t num_tokens) {
  const std::int64_t needed = (num_tokens + block_size_ - 1) / block_size_;
  state.rings.resize(sliding_windows_.size());
  std::int64_t wanted = std::max<std::int64_t>(0, needed - std::ssize(state.block_table));
  for (std::size_t g = 0; g < sliding_windows_.size(); ++g) {
    wanted +=
        std::max<std::int64_t>(0, std::min(ring_blocks_[g], needed) - std::ssize(state.rings[g]));
  }
  if (wanted > std::ssize(free_blocks_)) return false;
  const auto take = [this] {
    const std::int32_t block = free_blocks_.back();
    free_blocks_.pop_back();
    return block;
  };
  while (std::ssize(state.block_table) < needed) state.block_table.push_back(take());
  for (std::size_t g = 0; g < sliding_windows_.size(); ++g) {
    std::vector<std::int32_t>& ring = state.rings[g];
    while (std::ssize(ring) < std::min(ring_blocks_[g], needed)) ring.push_back(take());
  }
  return true;
}

void DraftModelProposer::propose(std::span<const ProposalRequest> requests,
                                 std::vector<Proposal>& proposals) {
  proposals.resize(requests.size());
  // Grown before any feed points into it.
  for (const ProposalRequest& r : requests) {
    PAGODA_CHECK(r.slot >= 0) << "bad slot " << r.slot;
    if (static_cast<std::size_t>(r.slot) >= states_.size()) states_.resize(r.slot + 1);
  }
  std::vector<Feed> feeds;
  std::vector<std::size_t> request_of;  // feeds[f] drafts for requests[request_of[f]]
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const ProposalRequest& r = requests[i];
    proposals[i].token_ids.clear();
    proposals[i].probs.clear();
    std::optional<RequestState>& slot_state = states_[static_cast<std::size_t>(r.slot)];
    if (!slot_state) slot_state.emplace().rng.seed(draft_seed(*r.sampling));
    RequestState& state = *slot_state;
    const auto n = static_cast<std::int64_t>(r.token_ids.size());
    if (n < 1) continue;
    const auto mismatch = std::mismatch(state.cached.begin(), state.cached.end(),
                                        r.token_ids.begin(), r.token_ids.end());
    const std::int64_t keep = std::min<std::int64_t>(mismatch.first - state.cached.begin(), n - 1);
    // Feeds t[keep..n-1] and k - 1 drafts after them: n + k - 1 tokens in the cache.
    if (!reserve(state, n + r.max_tokens - 1)) continue;
    state.cached.assign(r.token_ids.begin(), r.token_ids.end());
    feeds.push_back({&state, {r.token_ids.begin() + keep, r.token_ids.end()}, keep, feeds.size()});
    request_of.push_back(i);
  }
  // Pass j drafts token j + 1 for every request that still wants one.
  for (std::int64_t j = 0; !feeds.empty(); ++j) {
    if (Status s = run(feeds); !s.ok()) {
      // A failed pass loses what it wrote: forget every state it touched, draft nothing.
      for (const Feed& f : feeds) f.state->cached.clear();
      for (const std::size_t i : request_of) proposals[i] = {};
      return;
    }
    std::vector<Feed> next;
    std::vector<std::size_t> next_request_of;
    for (std::size_t f = 0; f < feeds.size(); ++f) {
      const std::size_t i = request_of[f];
      Proposal& proposal = proposals[i];
      const std::span<const float> row =
          std::span(logits_).subspan(feeds[f].row * static_cast<std::size_t>(vocab_size_),
                                     static_cast<std::size_t>(vocab_size_));
      const std::int32_t token =
          draw(row, *requests[i].sampling, feeds[f].state->rng, proposal.probs);
      proposal.token_ids.push_back(token);
      if (static_cast<std::int64_t>(proposal.token_ids.size()) >= requests[i].max_tokens) continue;
      const std::int64_t position =
          feeds[f].start + static_cast<std::int64_t>(feeds[f].tokens.size());
      feeds[f].state->cached.push_back(token);
      next.push_back({feeds[f].state, {token}, position, next.size()});
      next_request_of.push_back(i);
    }
    feeds.swap(next);
    request_of.swap(next_request_of);
  }
}

// Runs every feed through the draft model in as few forward passes as its token budget allows
// (a long catch-up is split into chunks); logits_[feed.row] gets each feed's last row.
Status DraftModelProposer::run(std::vector<Feed>& feeds) {
  const std::int64_t budget = executor_->info().max_num_batched_tokens;
  logits_.resize(feeds.size() * static_cast<std::size_t>(vocab_size_));
  std::vector<std::int64_t> done(feeds.size(), 0);  // tokens of each feed already run
  std::size_t f = 0;
  while (f < feeds.size()) {
    batch_.clear();
    batch_.query_start_loc.push_back(0);
    std::vector<std::size_t> logits_rows;
    std::int64_t max_blocks = 0;
    for (std::size_t g = f; g < feeds.size(); ++g) {
      max_blocks = std::max<std::int64_t>(
          max_blocks, static_cast<std::int64_t>(feeds[g].state->block_table.size()));
    }
    batch_.max_blocks_per_seq = max_blocks;
    batch_.kv_groups.resize(sliding_windows_.size());
    while (f < feeds.size() && batch_.num_tokens() < budget) {
      Feed& feed = feeds[f];
      const auto total = static_cast<std::int64_t>(feed.tokens.size());
      const std::int64_t count = std::min(total - done[f], budget - batch_.num_tokens());
      const std::vector<std::int32_t>& table = feed.state->block_table;
      const std::int64_t first_query = feed.start + done[f];
      for (std::int64_t t = done[f]; t < done[f] + count; ++t) {
        const std::int64_t pos = feed.start + t;
        batch_.token_ids.push_back(feed.tokens[static_cast<std::size_t>(t)]);
        batch_.positions.push_back(static_cast<std::int32_t>(pos));
        batch_.slot_mapping.push_back(
            std::int64_t{table[static_cast<std::size_t>(pos / block_size_)]} * block_size_ +
            pos % block_size_);
        for (std::size_t g = 0; g < sliding_windows_.size(); ++g) {
          const std::vector<std::int32_t>& ring = feed.state->rings[g];
          const auto block = static_cast<std::size_t>((pos / block_size_) % ring_blocks_[g]);
          batch_.kv_groups[g].slot_mapping.push_back(std::int64_t{ring[block]} * block_size_ +
                                                     pos % block_size_);
        }
      }
      done[f] += count;
      const std::int64_t seq_len = feed.start + done[f];
      batch_.query_start_loc.push_back(static_cast<std::int32_t>(batch_.num_tokens()));
      batch_.seq_lens.push_back(static_cast<std::int32_t>(seq_len));
      batch_.block_tables.insert(batch_.block_tables.end(), table.begin(), table.end());
      batch_.block_tables.resize(batch_.block_tables.size() + (max_blocks - table.size()), -1);
      // A sliding table names the ring's blocks from the pass's first window block to its last
      // key's block, -1 elsewhere, so no block appears twice.
      const std::int64_t last = (seq_len + block_size_ - 1) / block_size_;
      for (std::size_t g = 0; g < sliding_windows_.size(); ++g) {
        const std::vector<std::int32_t>& ring = feed.state->rings[g];
        const std::int64_t first =
            std::max<std::int64_t>(0, first_query - sliding_windows_[g] + 1) / block_size_;
        std::vector<std::int32_t>& tables = batch_.kv_groups[g].block_tables;
        for (std::int64_t b = 0; b < max_blocks; ++b) {
          tables.push_back(
              b < first || b >= last ? -1 : ring[static_cast<std::size_t>(b % ring_blocks_[g])]);
        }
      }
      if (done[f] < total) break;  // the budget ran out mid-feed: the rest goes next pass
      batch_.logits_indices.push_back(static_cast<std::int32_t>(batch_.num_tokens() - 1));
      logits_rows.push_back(feed.row);
      ++f;
    }
    batch_logits_.resize(logits_rows.size() * static_cast<std::size_t>(vocab_size_));
    PAGODA_RETURN_IF_ERROR(executor_->forward(batch_, batch_logits_.data()));
    const auto vocab = static_cast<std::size_t>(vocab_size_);
    for (std::size_t r = 0; r < logits_rows.size(); ++r) {
      std::copy_n(batch_logits_.begin() + static_cast<std::ptrdiff_t>(r * vocab), vocab,
                  logits_.begin() + static_cast<std::ptrdiff_t>(logits_rows[r] * vocab));
    }
  }
  return Status::ok_status();
}

// Greedy: the argmax, no probabilities. Otherwise a draw from softmax(logits / temperature),
// whose row is appended to `probs`.
std::int32_t DraftModelProposer::draw(std::span<const float> logits, const SamplingParams& sampling,
                                      std::mt19937_64& rng, std::vector<float>& probs) {
  if (sampling.is_greedy()) {
    return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) -
                                     logits.begin());
  }
  const double inv_t = 1.0 / sampling.temperature;
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  const std::size_t offset = probs.size();
  probs.resize(offset + logits.size());
  double total = 0.0;
  for (std::size_t v = 0; v < logits.size(); ++v) {
    const double w = std::exp((double{logits[v]} - max_logit) * inv_t);
    probs[offset + v] = static_cast<float>(w);
    total += w;
  }
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  double target = u * total;
  std::int32_t token = static_cast<std::int32_t>(logits.size()) - 1;
  for (std::size_t v = 0; v < logits.size(); ++v) {
    target -= probs[offset + v];
    if (target < 0.0) {
      token = static_cast<std::int32_t>(v);
      break;
    }
  }
  for (std::size_t v = 0; v < logits.size(); ++v) {
    probs[offset + v] = static_cast<float>(probs[offset + v] / total);
  }
  return token;
}

}  // namespace pagoda::spec
