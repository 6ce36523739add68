#include "cli/config_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <vector>

namespace pagoda::cli {

namespace {

// A scalar, or each item of a sequence (flags that take several values).
StatusOr<std::vector<std::string>> values_of(const YAML::Node& node, const std::string& where) {
  std::vector<std::string> values;
  if (node.IsScalar()) {
    values.push_back(node.Scalar());
  } else if (node.IsSequence()) {
    for (const YAML::Node& item : node) {
      if (!item.IsScalar()) return invalid_argument(where + ": list items must be plain values");
      values.push_back(item.Scalar());
    }
  } else {
    return invalid_argument(where + ": expected a value or a list of values");
  }
  return values;
}

}  // namespace

Status apply_config_file(const std::string& path, CLI::App& app) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return not_found("--config " + path + ": cannot read the file");
  } catch (const YAML::Exception& e) {
    return invalid_argument("--config " + path + ": not valid YAML: " + e.what());
  }
  if (root.IsNull()) return Status::ok_status();  // an empty file sets nothing
  if (!root.IsMap()) {
    return invalid_argument("--config " + path + ": expected a mapping of flag names to values");
  }
  for (const auto& entry : root) {
    if (!entry.first.IsScalar()) {
      return invalid_argument("--config " + path + ": keys must be flag names");
    }
    std::string key = entry.first.Scalar();
    std::replace(key.begin(), key.end(), '_', '-');
    const std::string where = "--config " + path + ": " + entry.first.Scalar();
    if (key == "config") return invalid_argument(where + ": a config file cannot name another");
    // The positional MODEL may be given as `model`, as in vLLM's config files.
    CLI::Option* option = app.get_option_no_throw(key == "model" ? "model" : "--" + key);
    if (option == nullptr)
      return invalid_argument(where + ": not a flag of `pagoda " + app.get_name() + "`");
    if (option->count() > 0) continue;  // the command line wins
    PAGODA_ASSIGN_OR_RETURN(std::vector<std::string> values, values_of(entry.second, where));
    try {
      for (std::string& value : values) option->add_result(std::move(value));
      option->run_callback();
    } catch (const CLI::Error& e) {
      return invalid_argument(where + ": " + e.what());
    }
  }
  return Status::ok_status();
}

}  // namespace pagoda::cli
