#include "sampling/host_sampling_executor.h"

namespace pagoda::sampling {

HostSampler& HostSamplingExecutor::sampler() {
  if (!sampler_) sampler_ = std::make_unique<HostSampler>(info().vocab_size);
  return *sampler_;
}

Status HostSamplingExecutor::open_sampling_slot(std::int32_t slot,
                                                const SlotSamplingConfig& config) {
  return sampler().open_slot(slot, config);
}

void HostSamplingExecutor::close_sampling_slot(std::int32_t slot) {
  sampler().close_slot(slot);
}

void HostSamplingExecutor::accept_tokens(std::int32_t slot, std::span<const std::int32_t> tokens) {
  sampler().accept_tokens(slot, tokens);
}

Status HostSamplingExecutor::execute(const ForwardBatch& batch, const SamplingBatch& sampling,
                                     StepOutput& out) {
  if (sampling.rows.size() != batch.logits_indices.size()) {
    return invalid_argument("execute: " + std::to_string(sampling.rows.size()) +
                            " sampling rows for " + std::to_string(batch.logits_indices.size()) +
                            " logits rows");
  }
  const std::size_t vocab = static_cast<std::size_t>(info().vocab_size);
  logits_.resize(batch.logits_indices.size() * vocab);
  const Status forwarded = forward(batch, logits_.data());
  // Structured outputs' masks were filled beside the forward pass.
  sampling.wait_for_masks();
  PAGODA_RETURN_IF_ERROR(forwarded);
  sampler().sample(logits_, sampling, sampling_pool(), out);
  return Status::ok_status();
}

}  // namespace pagoda::sampling
