// `--config FILE.yaml`: a flat YAML mapping whose keys are a subcommand's long flag names, in
// vLLM's spellings (`max-num-seqs` or `max_num_seqs`). A flag given on the command line wins
// over the file.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "pagoda/status.h"

namespace pagoda::cli {

/// Sets every option of `app` that the command line left unset from the YAML file at `path`.
/// INVALID_ARGUMENT naming the file and key for unreadable YAML, a key that is not a flag of
/// `app`, or a value the flag rejects.
Status apply_config_file(const std::string& path, CLI::App& app);

}  // namespace pagoda::cli
