// Attribute, item and slice access and iteration, with jinja2's sandboxed lookup rules: a missing
// attribute or key is undefined, while using an undefined value as an object is an error.
#pragma once

#include <string_view>
#include <vector>

#include "template/jinja/value.h"

namespace pagoda::jinja {

/// `obj.name`: methods first, then dict keys and namespace attributes.
StatusOr<Value> get_attribute(const Value& obj, std::string_view name);
/// `obj[key]`: keys and indexes first, then attributes.
StatusOr<Value> get_item(const Value& obj, const Value& key);
/// `obj[start:stop:step]` on strings, lists and tuples; absent bounds are undefined values.
StatusOr<Value> get_slice(const Value& obj, const Value& start, const Value& stop,
                          const Value& step);
/// The items a for loop visits: list items, dict keys, string characters; nothing for undefined.
StatusOr<std::vector<Value>> iterate(const Value& value);
/// The error for using an undefined value where a real one is needed.
Status undefined_error(const Value& value);

}  // namespace pagoda::jinja
