#include "cli/env_options.h"

#include <cctype>

namespace pagoda::cli {

std::string env_name_for(std::string_view prefix, std::string_view flag_name) {
  while (!flag_name.empty() && flag_name.front() == '-') flag_name.remove_prefix(1);
  std::string name(prefix);
  for (const char c : flag_name) {
    name += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return name;
}

void add_env_names(CLI::App& app, std::string_view prefix) {
  const CLI::Option* help = app.get_help_ptr();
  const CLI::Option* help_all = app.get_help_all_ptr();
  for (CLI::Option* option : app.get_options()) {
    if (option == help || option == help_all || !option->get_envname().empty()) continue;
    // The first long name is the flag's canonical spelling; a positional has only its name.
    const auto& long_names = option->get_lnames();
    if (!long_names.empty()) {
      option->envname(env_name_for(prefix, long_names.front()));
    } else if (option->get_positional()) {
      option->envname(env_name_for(prefix, option->get_name(/*positional=*/true)));
    }
  }
}

}  // namespace pagoda::cli
