// One link of a sampler chain: temperature, top-k, top-p, min-p today; penalties, logit bias and
// grammars later. Stateful stages see every accepted token through accept().
#pragma once

#include <cstdint>

#include "sampling/candidates.h"

namespace pagoda::sampling {

/// Rescales or removes candidates; never empties the set.
class SamplerStage {
 public:
  virtual ~SamplerStage() = default;
  /// Narrows or rescales `candidates` for this step.
  virtual void apply(Candidates& candidates) = 0;
  /// The token the request took this step (for stages that remember, such as penalties).
  virtual void accept(std::int32_t token) {}
};

}  // namespace pagoda::sampling
