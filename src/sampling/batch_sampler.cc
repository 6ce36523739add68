#include "sampling/batch_sampler.h"

#include <chrono>
#include <utility>

#include "common/check.h"

namespace pagoda::sampling {

void BatchSampler::add(const std::string& request_id, const SamplingParams& params,
                       std::span<const std::int32_t> prompt_token_ids,
                       std::vector<std::int32_t> stop_token_ids, bool logprobs_for_trace_only) {
  const auto [it, inserted] = samplers_.try_emplace(
      request_id, Entry{Sampler(params, prompt_token_ids, std::move(stop_token_ids)),
                        params.logprobs, logprobs_for_trace_only});
  PAGODA_CHECK(inserted) << "sampler for " << request_id << " exists already";
}

void BatchSampler::remove(std::string_view request_id) {
  if (const auto it = samplers_.find(request_id); it != samplers_.end()) samplers_.erase(it);
}

bool BatchSampler::contains(std::string_view request_id) const {
  return samplers_.find(request_id) != samplers_.end();
}

Sampler& BatchSampler::sampler(std::string_view request_id) {
  const auto it = samplers_.find(request_id);
  PAGODA_CHECK(it != samplers_.end()) << "no sampler for " << request_id;
  return it->second.sampler;
}

std::int32_t BatchSampler::sample(std::string_view request_id, std::span<const float> logits,
                                  std::optional<SampledLogprobs>& logprobs) {
  const auto it = samplers_.find(request_id);
  PAGODA_CHECK(it != samplers_.end()) << "no sampler for " << request_id;
  Entry& entry = it->second;
  const std::int32_t token = entry.sampler.sample(logits);
  entry.sampler.accept(token);
  fill_logprobs(entry, logits, token, logprobs);
  return token;
}

void BatchSampler::force(std::string_view request_id, std::span<const float> logits,
                         std::int32_t token, std::optional<SampledLogprobs>& logprobs) {
  const auto it = samplers_.find(request_id);
  PAGODA_CHECK(it != samplers_.end()) << "no sampler for " << request_id;
  Entry& entry = it->second;
  entry.sampler.accept(token);
  fill_logprobs(entry, logits, token, logprobs);
}

void BatchSampler::fill_logprobs(const Entry& entry, std::span<const float> logits,
                                 std::int32_t token, std::optional<SampledLogprobs>& logprobs) {
  if (!entry.num_logprobs) {
    logprobs.reset();
    return;
  }
  if (!entry.logprobs_for_trace_only) {
    compute_logprobs(logits, token, *entry.num_logprobs, logprobs.emplace());
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  compute_logprobs(logits, token, *entry.num_logprobs, logprobs.emplace());
  trace_logprob_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace pagoda::sampling
