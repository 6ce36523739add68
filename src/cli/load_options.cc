#include "cli/load_options.h"

#include "tokenizer/model_tokenizer.h"

namespace pagoda::cli {

void LoadOptions::add_to(CLI::App& app) {
  app.add_option("--load-format", load_format,
                 "auto (the model's weights) or dummy (random weights of the model's shapes; "
                 "MODEL may then be a config.json file or a folder holding one, e.g. "
                 "configs/models/llama-3.1-8b.json)")
      ->capture_default_str();
  app.add_option("--tokenizer", tokenizer,
                 "Tokenizer (and chat template) to use instead of the model's: a .gguf file or a "
                 "folder with tokenizer.json. Sampled ids it lacks decode to nothing");
}

Status LoadOptions::apply(engine::ExecutorOptions& options) const {
  PAGODA_ASSIGN_OR_RETURN(options.load_format, engine::parse_load_format(load_format));
  return Status::ok_status();
}

StatusOr<LoadedModel> LoadOptions::open(const std::string& model_path,
                                        engine::LoadFormat format) const {
  LoadedModel out;
  PAGODA_ASSIGN_OR_RETURN(ModelFiles files, engine::open_model_for(model_path, format));
  out.files = std::make_shared<const ModelFiles>(std::move(files));
  if (tokenizer.empty()) {
    const ModelFiles& f = *out.files;
    if (format == engine::LoadFormat::kDummy && f.format == ModelFormat::kHuggingFace &&
        f.tokenizer_json_path.empty()) {
      return not_found(model_path +
                       " has no tokenizer.json; pass --tokenizer PATH (a .gguf file or a folder "
                       "with tokenizer.json)");
    }
    out.tokenizer_files = out.files;
  } else {
    auto opened = open_tokenizer_files(tokenizer);
    if (!opened.ok()) {
      return Status(opened.status().code(), "--tokenizer " + opened.status().message());
    }
    out.tokenizer_files = std::make_shared<const ModelFiles>(std::move(*opened));
  }
  auto loaded = load_model_tokenizer(*out.tokenizer_files);
  if (!loaded.ok()) {
    if (tokenizer.empty()) return loaded.status();
    return Status(loaded.status().code(), "--tokenizer " + loaded.status().message());
  }
  const std::int64_t model_vocab = out.files->config.vocab_size;
  if (!tokenizer.empty() && model_vocab > 0 && (*loaded)->vocab_size() > model_vocab) {
    return invalid_argument(
        "--tokenizer " + tokenizer + " has " + std::to_string((*loaded)->vocab_size()) +
        " tokens, more than the model's vocab_size " + std::to_string(model_vocab) +
        "; its ids past that have no embedding. Use a tokenizer with at most "
        "the model's vocabulary");
  }
  out.tokenizer = std::move(*loaded);
  return out;
}

}  // namespace pagoda::cli
