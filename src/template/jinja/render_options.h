// Sandbox limits and the injectable clock of one render.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <optional>

namespace pagoda::jinja {

/// Bounds that turn runaway templates into errors instead of hangs or crashes.
struct RenderLimits {
  /// Loop iterations summed over the whole render.
  std::int64_t max_loop_iterations = 1'000'000;
  /// Nested macro calls, caller() calls and recursive loops.
  int max_call_depth = 100;
  /// Bytes of output, and of any one string built while rendering.
  std::size_t max_output_bytes = 16u << 20;
};

/// Everything a render needs besides the template and its variables.
struct RenderOptions {
  RenderLimits limits;
  /// What strftime_now() formats; the local time when unset.
  std::optional<std::tm> now;
};

}  // namespace pagoda::jinja
