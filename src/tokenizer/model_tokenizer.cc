#include "tokenizer/model_tokenizer.h"

#include "tokenizer/gguf_tokenizer_loader.h"

namespace pagoda {

StatusOr<std::unique_ptr<Tokenizer>> load_model_tokenizer(const ModelFiles& files) {
  if (files.format == ModelFormat::kGguf) return load_tokenizer_from_gguf(*files.gguf);
  if (files.tokenizer_json_path.empty()) {
    return not_found(files.path +
                     ": no tokenizer.json in the model folder; Pagoda reads tokenizers from "
                     "tokenizer.json (export one with transformers' save_pretrained)");
  }
  return load_tokenizer_json(files.tokenizer_json_path, files.tokenizer_config_path);
}

}  // namespace pagoda
