#include "template/jinja/arguments.h"

#include <string>

namespace pagoda::jinja {

StatusOr<std::vector<Value>> bind_arguments(const CallArgs& args,
                                            std::initializer_list<std::string_view> names,
                                            std::string_view callee) {
  std::vector<Value> bound(names.size());
  if (args.positional.size() > names.size()) {
    return invalid_argument("TypeError: " + std::string(callee) + "() takes at most " +
                            std::to_string(names.size()) + " arguments (" +
                            std::to_string(args.positional.size()) + " given)");
  }
  for (std::size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    std::size_t index = 0;
    for (std::string_view name : names) {
      if (name == key) break;
      ++index;
    }
    if (index == names.size()) {
      return invalid_argument("TypeError: " + std::string(callee) +
                              "() got an unexpected keyword argument '" + key + "'");
    }
    bound[index] = value;
  }
  return bound;
}

}  // namespace pagoda::jinja
