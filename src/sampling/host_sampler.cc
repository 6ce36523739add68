#include "sampling/host_sampler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "backend/cpu/thread_pool.h"
#include "common/check.h"
#include "sampling/logprobs.h"
#include "sampling/random_draw.h"
#include "sampling/vocab_scan.h"

namespace pagoda::sampling {

struct HostSampler::Slot {
  bool open = false;
  /// As opened, except: logit_bias sorted by id, min_tokens_banned_ids sorted and unique, and
  /// prompt_token_ids the sorted set of distinct prompt tokens, kept only when the repetition
  /// penalty reads it (repetition_penalty != 1).
  SlotSamplingConfig config;
  /// Output token counts, (id, count) by ascending id: a request's output is a few thousand
  /// tokens at most, so a sorted vector beats a vocabulary-sized array per slot.
  std::vector<std::pair<std::int32_t, std::int32_t>> counts;
};

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// One thread's scratch for the rows it samples; capacities persist, so a step allocates nothing
// after the first.
struct RowScratch {
  std::vector<float> processed;  // [vocab] the row after stages 1-4
  std::vector<float> values;     // kth_largest's buffer
  // The tokens that may survive top-k, top-p and min-p, by ascending id: scaled logit, id, and
  // p = exp(s - max s).
  std::vector<float> candidate_s;
  std::vector<std::int32_t> candidate_ids;
  std::vector<double> candidate_p;
  std::vector<double> mass;  // mass_threshold's reorderable copy of candidate_p
};

RowScratch& row_scratch() {
  thread_local RowScratch scratch;
  return scratch;
}

void sort_unique(std::vector<std::int32_t>& ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
}

bool is_greedy(const SamplingRow& row) {
  return row.temperature <= 0.0f || row.top_k == 1;
}

// A float a little below `s`: a candidate floor derived through log() and double rounding must
// never drop a token that the exact test keeps, while extra candidates cost nothing but time.
float loose_floor(double s) {
  return static_cast<float>(s - 1e-4 * (1.0 + std::abs(s)));
}

// The token the rules after stage 4 of pagoda/step_sampling.h pick from processed logits `l`,
// for a row that is not forced: pick_token_reference's answer, found without a sort.
//
//   greedy                   -> argmax
//   no top-k, top-p, min-p   -> race over the whole row
//   otherwise                -> gather the candidates (tokens above a floor every kept token
//                               clears), decide top-p and min-p on them, race the kept ones
//
// Probabilities are fp32 exps of fp32 differences, and top-p's total without top-k is summed in
// fp32 blocks: a cut-off may differ from the reference's only for a token whose probability or
// cumulative mass lies within a few 1e-7 (relative) of it.
std::int32_t pick_token(std::span<const float> l, const SamplingRow& row, RowScratch& scratch) {
  if (is_greedy(row)) return static_cast<std::int32_t>(argmax_index(l));
  const auto vocab = static_cast<std::int64_t>(l.size());
  const float scale = 1.0f / row.temperature;
  const bool use_top_k = row.top_k > 0 && row.top_k < vocab;
  const bool use_top_p = row.top_p < 1.0f;
  const bool use_min_p = row.min_p > 0.0f;
  // Top-k's selection leaves the largest logits in its buffer, which saves a pass for the max.
  const float kth_l = use_top_k ? kth_largest(l, row.top_k, scratch.values) : -kInf;
  const float max_l = kth_l > -kInf
                          ? *std::max_element(scratch.values.begin(), scratch.values.end())
                          : max_value(l);
  const float max_s = max_l * scale;
  // Every token masked, or a temperature so small that the scaled maximum overflows: the limit
  // of the draw is the argmax.
  if (!std::isfinite(max_s)) return static_cast<std::int32_t>(argmax_index(l));
  const std::uint64_t key = draw_key(row.seed, row.position);
  if (!use_top_k && !use_top_p && !use_min_p) {
    return static_cast<std::int32_t>(gumbel_race(l, scale, nullptr, key));
  }

  // The floor: top-k keeps exactly s >= s_k. Without top-k, the top-p cut-off lies above every
  // token with p < eps = (1 - top_p) * total / (2 vocab), since together those hold less than
  // (1 - top_p) / 2 of the mass. min_p's floor may only narrow the candidates when top-p, which
  // needs all of its tokens' mass, is off.
  float floor = -kInf;
  double total = 0.0;
  if (use_top_k) {
    floor = kth_l * scale;
  } else if (use_top_p) {
    total = sum_exp_scaled(l, scale, max_s);
    const double eps = (1.0 - double{row.top_p}) * total / (2.0 * static_cast<double>(vocab));
    floor = loose_floor(double{max_s} + std::log(eps));
  }
  if (use_min_p && !use_top_p) {
    floor = std::max(floor, loose_floor(double{max_s} + std::log(double{row.min_p})));
  }
  auto& s = scratch.candidate_s;
  auto& ids = scratch.candidate_ids;
  auto& p = scratch.candidate_p;
  s.resize(l.size() + 8);  // no-ops after a thread's first row of this vocabulary
  ids.resize(l.size() + 8);
  const std::size_t num_candidates = gather_at_least(l, scale, floor, s.data(), ids.data());
  p.resize(num_candidates);
  exp_shifted(std::span<const float>(s.data(), num_candidates), max_s, p.data());

  double top_p_cutoff = 0.0;
  if (use_top_p) {
    // With top-k the candidates are exactly its kept tokens, whose mass top-p divides; without,
    // `total` is the whole row's.
    if (use_top_k) total = std::accumulate(p.begin(), p.end(), 0.0);
    scratch.mass.assign(p.begin(), p.end());
    top_p_cutoff = mass_threshold(scratch.mass, double{row.top_p} * total);
  }
  const double min_p_cutoff = use_min_p ? double{row.min_p} : 0.0;
  std::size_t num_kept = 0;
  for (std::size_t i = 0; i < num_candidates; ++i) {
    if (p[i] >= top_p_cutoff && p[i] >= min_p_cutoff) {
      s[num_kept] = s[i];
      ids[num_kept] = ids[i];
      ++num_kept;
    }
  }
  // min_p > 1 keeps nothing: the limit is the argmax again.
  if (num_kept == 0) return static_cast<std::int32_t>(argmax_index(l));
  const std::int64_t winner =
      gumbel_race(std::span<const float>(s.data(), num_kept), 1.0f, ids.data(), key);
  return ids[static_cast<std::size_t>(winner)];
}

}  // namespace

HostSampler::HostSampler(std::int64_t vocab_size) : vocab_size_(vocab_size) {
  PAGODA_CHECK(vocab_size > 0) << "vocab_size " << vocab_size;
}

HostSampler::~HostSampler() = default;
HostSampler::HostSampler(HostSampler&&) noexcept = default;
HostSampler& HostSampler::operator=(HostSampler&&) noexcept = default;

Status HostSampler::open_slot(std::int32_t slot, const SlotSamplingConfig& config) {
  if (slot < 0) return invalid_argument("sampling slot " + std::to_string(slot) + " is negative");
  if (is_open(slot)) {
    return invalid_argument("sampling slot " + std::to_string(slot) + " is open already");
  }
  PAGODA_RETURN_IF_ERROR(config.validate(vocab_size_));

  if (static_cast<std::size_t>(slot) >= slots_.size()) slots_.resize(slot + 1);
  Slot& s = slots_[static_cast<std::size_t>(slot)];
  s.open = true;
  s.config = config;
  std::sort(s.config.logit_bias.begin(), s.config.logit_bias.end());
  sort_unique(s.config.min_tokens_banned_ids);
  if (config.repetition_penalty != 1.0f) {
    sort_unique(s.config.prompt_token_ids);
  } else {
    s.config.prompt_token_ids.clear();
  }
  s.counts.clear();
  return Status::ok_status();
}

void HostSampler::close_slot(std::int32_t slot) {
  if (!is_open(slot)) return;
  Slot& s = slots_[static_cast<std::size_t>(slot)];
  s.open = false;
  s.counts.clear();
}

bool HostSampler::is_open(std::int32_t slot) const {
  return slot >= 0 && static_cast<std::size_t>(slot) < slots_.size() &&
         slots_[static_cast<std::size_t>(slot)].open;
}

void HostSampler::accept_tokens(std::int32_t slot, std::span<const std::int32_t> tokens) {
  PAGODA_CHECK(is_open(slot)) << "sampling slot " << slot << " is not open";
  Slot& s = slots_[static_cast<std::size_t>(slot)];
  for (const std::int32_t token : tokens) {
    PAGODA_CHECK(token >= 0 && token < vocab_size_) << "token " << token;
    if (!s.config.has_penalties()) continue;  // only the penalties read the counts
    const auto it = std::lower_bound(s.counts.begin(), s.counts.end(),
                                     std::pair<std::int32_t, std::int32_t>(token, 0));
    if (it != s.counts.end() && it->first == token) {
      ++it->second;
    } else {
      s.counts.insert(it, {token, 1});
    }
  }
}

const HostSampler::Slot& HostSampler::slot_for(const SamplingRow& row) const {
  PAGODA_CHECK(is_open(row.slot)) << "sampling slot " << row.slot << " is not open";
  return slots_[static_cast<std::size_t>(row.slot)];
}

bool HostSampler::needs_processing(const Slot& slot, const SamplingRow& row) {
  const SlotSamplingConfig& c = slot.config;
  const bool penalized = (c.has_penalties() && !slot.counts.empty()) ||
                         (c.repetition_penalty != 1.0f && !c.prompt_token_ids.empty());
  return row.allowed_mask >= 0 || !c.logit_bias.empty() || penalized ||
         (row.position < c.min_tokens && !c.min_tokens_banned_ids.empty());
}

void HostSampler::apply_processors(const Slot& slot, const SamplingRow& row,
                                   const SamplingBatch& batch, std::span<float> l) const {
  const SlotSamplingConfig& c = slot.config;
  // 1. The allowed mask: bit v of word v / 32.
  if (row.allowed_mask >= 0) {
    const auto words = static_cast<std::size_t>(SamplingBatch::mask_words(vocab_size_));
    const std::size_t first = static_cast<std::size_t>(row.allowed_mask) * words;
    PAGODA_CHECK(first + words <= batch.allowed_masks.size())
        << "allowed mask " << row.allowed_mask << " of " << batch.allowed_masks.size() / words;
    for (std::size_t w = 0; w < words; ++w) {
      for (std::uint32_t banned = ~batch.allowed_masks[first + w]; banned != 0;
           banned &= banned - 1) {
        const std::size_t v = w * 32 + static_cast<std::size_t>(__builtin_ctz(banned));
        if (v < l.size()) l[v] = -kInf;
      }
    }
  }
  // 2. min_tokens.
  if (row.position < c.min_tokens) {
    for (const std::int32_t id : c.min_tokens_banned_ids) l[static_cast<std::size_t>(id)] = -kInf;
  }
  // 3. Bias.
  for (const auto& [id, bias] : c.logit_bias) l[static_cast<std::size_t>(id)] += bias;
  // 4. Penalties, over the union of the prompt set and the output counts (both ascending).
  if (!c.has_penalties()) return;
  const float r = c.repetition_penalty;
  const auto& prompt = c.prompt_token_ids;
  const auto& counts = slot.counts;
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < prompt.size() || j < counts.size()) {
    const std::int32_t next_prompt =
        i < prompt.size() ? prompt[i] : std::numeric_limits<std::int32_t>::max();
    const std::int32_t next_output =
        j < counts.size() ? counts[j].first : std::numeric_limits<std::int32_t>::max();
    const std::int32_t id = std::min(next_prompt, next_output);
    const std::int32_t count = id == next_output ? counts[j].second : 0;
    if (id == next_prompt) ++i;
    if (id == next_output) ++j;
    float& x = l[static_cast<std::size_t>(id)];
    if (r != 1.0f) x = x > 0.0f ? x / r : x * r;
    if (count > 0) {
      x -= c.frequency_penalty * static_cast<float>(count) + c.presence_penalty;
    }
  }
}

void HostSampler::process_row(std::span<const float> raw, const SamplingRow& row,
                              const SamplingBatch& batch, std::span<float> processed) const {
  PAGODA_CHECK(raw.size() == static_cast<std::size_t>(vocab_size_) &&
               processed.size() == raw.size())
      << "rows of " << raw.size() << " and " << processed.size() << " for vocab " << vocab_size_;
  std::copy(raw.begin(), raw.end(), processed.begin());
  apply_processors(slot_for(row), row, batch, processed);
}

std::int32_t HostSampler::sample_row(std::span<const float> raw, const SamplingRow& row,
                                     const SamplingBatch& batch) const {
  const Slot& slot = slot_for(row);
  if (row.forced_token >= 0) {
    PAGODA_CHECK(row.forced_token < vocab_size_) << "forced token " << row.forced_token;
    return row.forced_token;
  }
  RowScratch& scratch = row_scratch();
  std::span<const float> l = raw;
  if (needs_processing(slot, row)) {
    scratch.processed.resize(raw.size());
    std::copy(raw.begin(), raw.end(), scratch.processed.begin());
    apply_processors(slot, row, batch, scratch.processed);
    l = scratch.processed;
  }
  return pick_token(l, row, scratch);
}

void HostSampler::sample(std::span<const float> logits, const SamplingBatch& batch,
                         cpu::ThreadPool* pool, StepOutput& out) {
  const auto start = std::chrono::steady_clock::now();
  const std::size_t num_rows = batch.rows.size();
  const auto vocab = static_cast<std::size_t>(vocab_size_);
  PAGODA_CHECK(logits.size() == num_rows * vocab)
      << logits.size() << " logits for " << num_rows << " rows of " << vocab;
  out.vocab_size = vocab_size_;
  out.token_ids.assign(num_rows, -1);
  out.returned_row.assign(num_rows, -1);
  out.logprobs.resize(num_rows);
  std::int32_t num_returned = 0;
  for (std::size_t i = 0; i < num_rows; ++i) {
    if (batch.rows[i].return_logits) out.returned_row[i] = num_returned++;
  }
  out.returned_logits.resize(static_cast<std::size_t>(num_returned) * vocab);

  // Rows are independent: each writes only its own entries of `out`.
  const auto run_rows = [&](std::int64_t begin, std::int64_t end) {
    for (auto i = static_cast<std::size_t>(begin); i < static_cast<std::size_t>(end); ++i) {
      const SamplingRow& row = batch.rows[i];
      const std::span<const float> raw = logits.subspan(i * vocab, vocab);
      if (row.return_logits) {
        std::copy(raw.begin(), raw.end(),
                  out.returned_logits.begin() + static_cast<std::ptrdiff_t>(out.returned_row[i]) *
                                                    static_cast<std::ptrdiff_t>(vocab));
        continue;
      }
      const std::int32_t token = sample_row(raw, row, batch);
      out.token_ids[i] = token;
      if (row.num_logprobs >= 0) compute_logprobs(raw, token, row.num_logprobs, out.logprobs[i]);
    }
  };
  const auto n = static_cast<std::int64_t>(num_rows);
  if (pool != nullptr && n > 1) {
    pool->parallel_for(n, run_rows);
  } else {
    run_rows(0, n);
  }

  // Penalty counts change only after every row has read them.
  for (std::size_t i = 0; i < num_rows; ++i) {
    const SamplingRow& row = batch.rows[i];
    if (!row.return_logits && !row.prompt_row) {
      accept_tokens(row.slot, std::span(&out.token_ids[i], 1));
    }
  }
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace pagoda::sampling
