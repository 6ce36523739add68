// jinja2's filters ("x | trim"), with transformers' own tojson.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "template/jinja/value.h"

namespace pagoda::jinja {

/// A filter takes the piped value and the filter's own arguments.
using FilterFn = StatusOr<Value> (*)(Evaluator&, const Value& input, const CallArgs& args);
using FilterMap = std::map<std::string, FilterFn, std::less<>>;

/// The filter called `name`, or nullptr.
const FilterFn* find_filter(std::string_view name);

/// Adds the filters over sequences and mappings (sequence_filters.cc).
void add_sequence_filters(FilterMap& filters);

}  // namespace pagoda::jinja
