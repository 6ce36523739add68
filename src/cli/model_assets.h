// What the CLI commands need from a model path: the opened files, the tokenizer and the chat
// template, loaded once with errors that say how to fix them.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "model/model_files.h"
#include "pagoda/status.h"
#include "pagoda/tokenizer.h"
#include "template/chat_template.h"
#include "tokenizer/model_tokenizer.h"

namespace pagoda::cli {

/// `$PAGODA_MODEL`, else the default model under ./models or beside the executable's build folder.
StatusOr<std::string> resolve_model_path(const std::string& given, const char* argv0);

/// A model's files and tokenizer, as most commands start.
struct ModelAndTokenizer {
  std::shared_ptr<const ModelFiles> files;
  std::unique_ptr<Tokenizer> tokenizer;
};

/// resolve_model_path, open_model_files and load_model_tokenizer in one.
StatusOr<ModelAndTokenizer> open_model_and_tokenizer(const std::string& given, const char* argv0);

/// The model's own chat template, or the one in `override_path` when that is not empty.
StatusOr<ChatTemplate> load_model_chat_template(const ModelFiles& files,
                                                const std::string& override_path);

}  // namespace pagoda::cli
