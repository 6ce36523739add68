// jinja2's tests: the names after `is` ("x is defined", "n is divisibleby 3").
#pragma once

#include <string_view>

#include "template/jinja/value.h"

namespace pagoda::jinja {

/// A test takes the tested value and the test's own arguments.
using TestFn = StatusOr<bool> (*)(Evaluator&, const Value& input, const CallArgs& args);

/// The test called `name`, or nullptr.
const TestFn* find_test(std::string_view name);

}  // namespace pagoda::jinja
