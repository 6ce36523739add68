// The default model's tokenizer and a fixed English corpus for the benchmarks that need real
// tokens (tokenizer, API encoders). The model path is $PAGODA_MODEL or the repository's default
// GGUF; benchmarks skip with an error when it is missing.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "model/model_files.h"
#include "pagoda/tokenizer.h"
#include "tokenizer/gguf_tokenizer_loader.h"

namespace pagoda::bench {

inline std::string default_model_path() {
  if (const char* env = std::getenv("PAGODA_MODEL")) return env;
  return std::string(PAGODA_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

/// The default model's tokenizer, loaded once; nullptr when the model file is absent.
inline std::shared_ptr<const Tokenizer> default_tokenizer() {
  static const std::shared_ptr<const Tokenizer> tokenizer =
      []() -> std::shared_ptr<const Tokenizer> {
    const std::string path = default_model_path();
    if (!std::filesystem::exists(path)) return nullptr;
    auto files = open_model_files(path);
    if (!files.ok() || files->gguf == nullptr) return nullptr;
    auto loaded = load_tokenizer_from_gguf(*files->gguf);
    if (!loaded.ok()) return nullptr;
    return std::shared_ptr<const Tokenizer>(std::move(*loaded));
  }();
  return tokenizer;
}

/// Prose and code from the repository's docs (README.md and docs/**/*.md, sorted), ~100 KB:
/// realistic text for tokenizer throughput, the same on every run of one checkout.
inline const std::string& corpus_text() {
  static const std::string text = [] {
    const std::filesystem::path root(PAGODA_SOURCE_DIR);
    std::vector<std::filesystem::path> files{root / "README.md"};
    if (std::filesystem::is_directory(root / "docs")) {
      for (const auto& entry : std::filesystem::recursive_directory_iterator(root / "docs"))
        if (entry.path().extension() == ".md") files.push_back(entry.path());
    }
    std::sort(files.begin() + 1, files.end());
    std::ostringstream out;
    for (const auto& file : files) out << std::ifstream(file).rdbuf() << "\n";
    return out.str();
  }();
  return text;
}

}  // namespace pagoda::bench
