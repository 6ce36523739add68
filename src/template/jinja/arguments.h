// Python-style binding of call arguments to named parameters, shared by filters, tests, methods
// and globals.
#pragma once

#include <initializer_list>
#include <string_view>
#include <vector>

#include "template/jinja/value.h"

namespace pagoda::jinja {

/// One Value per name in `names`, from position or keyword; undefined where the caller gave none.
StatusOr<std::vector<Value>> bind_arguments(const CallArgs& args,
                                            std::initializer_list<std::string_view> names,
                                            std::string_view callee);

/// `value` when it is defined, else `fallback`.
inline Value or_default(const Value& value, Value fallback) {
  return value.is_undefined() ? std::move(fallback) : value;
}

}  // namespace pagoda::jinja
