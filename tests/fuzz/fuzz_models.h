// What the fuzz targets run over: the default model's file (SmolLM2 GGUF, models/ from
// scripts/setup.sh), its tokenizer and chat template, each loaded once per process. Only
// pagoda_model and pagoda_tokenizer: the targets that need no more stay clear of the CPU backend.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "model/model_files.h"
#include "tokenizer/gguf_tokenizer_loader.h"

namespace pagoda::fuzz {

inline void fail(const std::string& what, const Status& status) {
  std::fprintf(stderr, "fuzz: %s: %s\n", what.c_str(), status.to_string().c_str());
  std::abort();
}

inline const ModelFiles& default_model_files() {
  static const ModelFiles files = [] {
    const std::string path =
        std::string(PAGODA_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
    auto opened = open_model_files(path);
    if (!opened.ok()) fail("cannot open " + path, opened.status());
    return std::move(*opened);
  }();
  return files;
}

inline const std::shared_ptr<const Tokenizer>& default_tokenizer() {
  static const std::shared_ptr<const Tokenizer> tokenizer = [] {
    auto loaded = load_tokenizer_from_gguf(*default_model_files().gguf);
    if (!loaded.ok()) fail("the default model's tokenizer", loaded.status());
    return std::shared_ptr<const Tokenizer>(std::move(*loaded));
  }();
  return tokenizer;
}

}  // namespace pagoda::fuzz
