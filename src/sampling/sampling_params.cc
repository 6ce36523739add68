#include "pagoda/sampling_params.h"

#include <cmath>
#include <string>

namespace pagoda {

Status SamplingParams::validate() const {
  if (!(temperature >= 0.0) || !std::isfinite(temperature)) {
    return invalid_argument("temperature must be a finite number >= 0, got " +
                            std::to_string(temperature));
  }
  if (top_k < -1) return invalid_argument("top_k must be -1, 0 (all tokens) or positive");
  if (!(top_p > 0.0 && top_p <= 1.0)) {
    return invalid_argument("top_p must be in (0, 1], got " + std::to_string(top_p));
  }
  if (!(min_p >= 0.0 && min_p <= 1.0)) {
    return invalid_argument("min_p must be in [0, 1], got " + std::to_string(min_p));
  }
  return Status::ok_status();
}

}  // namespace pagoda
