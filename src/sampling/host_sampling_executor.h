// A ModelExecutor whose sampling runs on the host: forward() into a host logits buffer, then the
// HostSampler. The CPU executor and the engine tests' fake executor are this; the CUDA executor
// samples on the device instead.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "pagoda/model_executor.h"
#include "sampling/host_sampler.h"

namespace pagoda::cpu {
class ThreadPool;
}

namespace pagoda::sampling {

class HostSamplingExecutor : public ModelExecutor {
 public:
  Status open_sampling_slot(std::int32_t slot, const SlotSamplingConfig& config) override;
  void close_sampling_slot(std::int32_t slot) override;
  void accept_tokens(std::int32_t slot, std::span<const std::int32_t> tokens) override;
  Status execute(const ForwardBatch& batch, const SamplingBatch& sampling,
                 StepOutput& out) override;

  /// Seconds spent sampling (not in forward), summed over execute() calls.
  double sampling_seconds() const { return sampler_ ? sampler_->seconds() : 0.0; }

 protected:
  /// The pool sample() spreads rows over; nullptr runs them on the calling thread.
  virtual cpu::ThreadPool* sampling_pool() { return nullptr; }

 private:
  HostSampler& sampler();

  std::unique_ptr<HostSampler> sampler_;  // built on first use, when info() is known
  std::vector<float> logits_;             // [num_logits, vocab], capacity kept
};

}  // namespace pagoda::sampling
