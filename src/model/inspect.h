// The human-readable summary `pagoda inspect MODEL` prints.
#pragma once

#include <ostream>

#include "model/model_files.h"
#include "pagoda/status.h"

namespace pagoda {

/// Writes the config, tokenizer kind, chat template presence and every tensor of `files` to
/// `out`; an error only when tokenizer.json cannot be read.
Status write_model_summary(const ModelFiles& files, std::ostream& out);

}  // namespace pagoda
