// --load-format and --tokenizer (vLLM's flags): where `serve`, `bench` and `generate` take the
// weights and the tokenizer from. With --load-format dummy the model may be a bare config.json
// (configs/models/), so a platform team can run an 8B shape with only a tokenizer at hand.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "engine/model_engine.h"
#include "model/model_files.h"
#include "pagoda/status.h"
#include "pagoda/tokenizer.h"

namespace pagoda::cli {

/// A model opened as the load flags say.
struct LoadedModel {
  /// The model: config, generation defaults and (load format auto) the weights.
  std::shared_ptr<const ModelFiles> files;
  /// Where the tokenizer and the chat template come from: `files`, or --tokenizer's files.
  std::shared_ptr<const ModelFiles> tokenizer_files;
  std::shared_ptr<const Tokenizer> tokenizer;
};

/// The load flags, as given.
struct LoadOptions {
  std::string load_format = "auto";  ///< auto: the model's weights; dummy: random ones
  std::string tokenizer;             ///< a .gguf file or a tokenizer folder; empty: the model's

  /// Registers the flags on `app`.
  void add_to(CLI::App& app);
  /// Sets options.load_format; INVALID_ARGUMENT naming --load-format for an unknown value.
  Status apply(engine::ExecutorOptions& options) const;
  /// Opens `model_path` for `format` and loads the tokenizer (--tokenizer's, else the model's).
  /// NOT_FOUND naming --tokenizer for a path that holds no tokenizer, or for a model without
  /// one (saying to pass --tokenizer); INVALID_ARGUMENT when --tokenizer's vocabulary is larger
  /// than the model's (its ids would index past the embedding).
  StatusOr<LoadedModel> open(const std::string& model_path, engine::LoadFormat format) const;
};

}  // namespace pagoda::cli
