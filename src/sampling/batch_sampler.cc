#include "sampling/batch_sampler.h"

#include <utility>

#include "common/check.h"

namespace pagoda::sampling {

void BatchSampler::add(const std::string& request_id, const SamplingParams& params,
                       std::span<const std::int32_t> prompt_token_ids,
                       std::vector<std::int32_t> stop_token_ids) {
  const auto [it, inserted] = samplers_.try_emplace(
      request_id,
      Entry{Sampler(params, prompt_token_ids, std::move(stop_token_ids)), params.logprobs});
  PAGODA_CHECK(inserted) << "sampler for " << request_id << " exists already";
}

void BatchSampler::remove(std::string_view request_id) {
  if (const auto it = samplers_.find(request_id); it != samplers_.end()) samplers_.erase(it);
}

bool BatchSampler::contains(std::string_view request_id) const {
  return samplers_.find(request_id) != samplers_.end();
}

std::int32_t BatchSampler::sample(std::string_view request_id, std::span<const float> logits,
                                  std::optional<SampledLogprobs>& logprobs) {
  const auto it = samplers_.find(request_id);
  PAGODA_CHECK(it != samplers_.end()) << "no sampler for " << request_id;
  Entry& entry = it->second;
  const std::int32_t token = entry.sampler.sample(logits);
  entry.sampler.accept(token);
  if (entry.num_logprobs) {
    compute_logprobs(logits, token, *entry.num_logprobs, logprobs.emplace());
  } else {
    logprobs.reset();
  }
  return token;
}

void BatchSampler::force(std::string_view request_id, std::span<const float> logits,
                         std::int32_t token, std::optional<SampledLogprobs>& logprobs) {
  const auto it = samplers_.find(request_id);
  PAGODA_CHECK(it != samplers_.end()) << "no sampler for " << request_id;
  Entry& entry = it->second;
  entry.sampler.accept(token);
  if (entry.num_logprobs) {
    compute_logprobs(logits, token, *entry.num_logprobs, logprobs.emplace());
  } else {
    logprobs.reset();
  }
}

}  // namespace pagoda::sampling
