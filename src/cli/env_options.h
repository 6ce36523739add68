// Every flag of a subcommand is also an environment variable, for containers and orchestrators
// that configure a process through its environment: `--max-num-seqs` is PAGODA_MAX_NUM_SEQS.
//
// Precedence, highest first: the command line, the environment, the `--config` file, the
// default. CLI11 reads an option's variable during parsing only when the command line left the
// option unset; `apply_config_file` then fills only the options still unset.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>

namespace pagoda::cli {

/// `prefix` + the long flag name in upper snake case: ("PAGODA_", "--max-num-seqs") ->
/// "PAGODA_MAX_NUM_SEQS"; a positional ("model") -> "PAGODA_MODEL".
std::string env_name_for(std::string_view prefix, std::string_view flag_name);

/// Gives every option of `app` registered so far its variable (`env_name_for`), so flags added
/// later to the subcommand get one without further work as long as this runs after them.
/// Options that already name a variable keep it; --help and options without a long or
/// positional name are left alone.
void add_env_names(CLI::App& app, std::string_view prefix);

}  // namespace pagoda::cli
