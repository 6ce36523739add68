// An FP8 KV cache for the attention benches: the E4M3 codes of a bf16 cache's values (what
// --kv-cache-dtype fp8 stores for them with unit scales), so the timed kernels see finite,
// model-like values rather than raw bytes (random bytes hold NaN codes, 0x7F and 0xFF, which
// make nearly every 128-dim score NaN and the online softmax rescale on every tile).
#pragma once

#include <cstdint>

#include "pagoda/status.h"

namespace pagoda::bench {

/// codes[i] = e4m3(values[i]) (round to nearest, saturating to +-448), values bf16 on the device;
/// on the legacy default stream.
Status e4m3_codes_of_bf16(const void* values, std::uint8_t* codes, std::int64_t n);

}  // namespace pagoda::bench
