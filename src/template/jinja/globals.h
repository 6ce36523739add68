// The functions transformers' environment makes global: range, dict, namespace, raise_exception,
// strftime_now. Nothing here reaches files, the network or the process environment.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "template/jinja/value.h"

namespace pagoda::jinja {

/// The builtin global names and their values.
std::vector<std::pair<std::string, Value>> builtin_globals();

}  // namespace pagoda::jinja
