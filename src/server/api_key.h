// The --api-key check. The comparison takes the same time whatever prefix of the key a guess
// gets right, so response timing does not leak the key.
#pragma once

#include <string_view>

namespace pagoda::server {

/// Whether an Authorization header value is "Bearer <expected>" (scheme case-insensitive).
bool bearer_token_matches(std::string_view authorization, std::string_view expected);

/// Compares two strings in time that depends only on their lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace pagoda::server
