// Python methods that templates call on strings, dicts and lists ("x.strip()", "d.items()").
// Methods that would mutate a value are refused, as in jinja2's ImmutableSandboxedEnvironment.
#pragma once

#include <optional>
#include <string_view>

#include "template/jinja/value.h"

namespace pagoda::jinja {

/// The method `name` of `obj` bound to it, or nullopt when `obj` has no such method.
std::optional<Value> bound_method(const Value& obj, std::string_view name);

}  // namespace pagoda::jinja
