// Text markers that arrive a token at a time: how much of a text's end could be the beginning of
// a marker, so a stream holds that much back instead of sending half a "<tool_call>" as content.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace pagoda::tools {

/// The length of the longest suffix of `text` that is a proper prefix of `marker`.
inline std::size_t partial_marker_suffix(std::string_view text, std::string_view marker) {
  for (std::size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace pagoda::tools
