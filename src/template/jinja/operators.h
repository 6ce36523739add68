// Python semantics of Jinja's binary operators and comparisons.
#pragma once

#include <cstddef>
#include <string_view>

#include "template/jinja/value.h"

namespace pagoda::jinja {

/// `a op b` for + - * / // % ** ~; results longer than `max_size` bytes are refused.
StatusOr<Value> binary_op(std::string_view op, const Value& a, const Value& b,
                          std::size_t max_size);
/// One comparison step: == != < > <= >= in, "not in".
StatusOr<bool> compare_op(std::string_view op, const Value& a, const Value& b);
/// Python's `needle in haystack`.
StatusOr<bool> contains(const Value& haystack, const Value& needle);

}  // namespace pagoda::jinja
