// A hash map keyed by std::string that is looked up by std::string_view without building a
// string (C++20 heterogeneous lookup), for the few places that still go from a client's request
// id to its state.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace pagoda {

/// Hashes std::string, std::string_view and const char* alike.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

template <typename Value>
using StringMap = std::unordered_map<std::string, Value, StringHash, std::equal_to<>>;

using StringSet = std::unordered_set<std::string, StringHash, std::equal_to<>>;

}  // namespace pagoda
