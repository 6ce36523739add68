// Finding where a JSON value ends in text that may still be arriving, without parsing it: depth
// over objects and arrays, with strings and escapes skipped. Linear in the text scanned.
#pragma once

#include <cstddef>
#include <string_view>

namespace pagoda::tools {

/// One past the end of the JSON object or array that opens at text[begin] ('{' or '['); npos when
/// it has not closed yet (or text[begin] opens neither).
std::size_t json_container_end(std::string_view text, std::size_t begin);

/// The first position at or after `pos` that is not JSON whitespace (text.size() if none).
std::size_t skip_json_space(std::string_view text, std::size_t pos);

}  // namespace pagoda::tools
