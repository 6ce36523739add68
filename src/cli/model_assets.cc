#include "cli/model_assets.h"

#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>

namespace pagoda::cli {

namespace {

constexpr const char* kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";

std::filesystem::path executable_dir(const char* argv0) {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) self = std::filesystem::absolute(argv0, ec);
  return self.parent_path();
}

}  // namespace

StatusOr<std::string> resolve_model_path(const std::string& given, const char* argv0) {
  if (!given.empty()) return given;
  if (const char* env = std::getenv("PAGODA_MODEL"); env != nullptr && *env != '\0') {
    return std::string(env);
  }
  // The repository layout: models/ at the root, the binary in build*/ (or build*/src/cli).
  auto exe_dir = executable_dir(argv0);
  std::array<std::filesystem::path, 3> candidates = {
      std::filesystem::path("models") / kDefaultModelFile,
      exe_dir.parent_path() / "models" / kDefaultModelFile,
      exe_dir.parent_path().parent_path().parent_path() / "models" / kDefaultModelFile,
  };
  for (const auto& candidate : candidates) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec)) return candidate.string();
  }
  return not_found(std::string("no MODEL given and the default model ") + kDefaultModelFile +
                   " is not in ./models or beside the build folder: run scripts/setup.sh, set "
                   "PAGODA_MODEL, or pass a .gguf file or Hugging Face folder");
}

StatusOr<ModelAndTokenizer> open_model_and_tokenizer(const std::string& given, const char* argv0) {
  PAGODA_ASSIGN_OR_RETURN(std::string path, resolve_model_path(given, argv0));
  PAGODA_ASSIGN_OR_RETURN(ModelFiles opened, open_model_files(path));
  auto files = std::make_shared<const ModelFiles>(std::move(opened));
  PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, load_model_tokenizer(*files));
  return ModelAndTokenizer{std::move(files), std::move(tokenizer)};
}

StatusOr<ChatTemplate> load_model_chat_template(const ModelFiles& files,
                                                const std::string& override_path) {
  if (!override_path.empty()) return load_chat_template_file(override_path);
  if (!files.chat_template) {
    return not_found(files.path +
                     ": the model has no chat template; pass one with --chat-template FILE");
  }
  auto compiled = ChatTemplate::compile(*files.chat_template);
  if (!compiled.ok()) {
    return Status(compiled.status().code(),
                  files.path + ": the model's chat template: " + compiled.status().message());
  }
  return compiled;
}

}  // namespace pagoda::cli
