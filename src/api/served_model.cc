#include "api/served_model.h"

#include <algorithm>
#include <chrono>

namespace pagoda::api {

namespace {

std::string special_token_text(const Tokenizer& tokenizer, std::optional<std::int32_t> id) {
  if (!id) return "";
  return std::string(tokenizer.token_to_piece(*id).value_or(""));
}

}  // namespace

bool ServedModel::serves(std::string_view model) const {
  return std::find(names.begin(), names.end(), model) != names.end();
}

StatusOr<ServedModel> make_served_model(std::vector<std::string> names, std::string root,
                                        std::shared_ptr<const Tokenizer> tokenizer,
                                        std::optional<ChatTemplate> chat_template,
                                        std::int64_t max_model_len, GenerationDefaults generation) {
  if (names.empty()) return invalid_argument("--served-model-name needs at least one name");
  for (const std::string& name : names) {
    if (name.empty()) return invalid_argument("--served-model-name: names must not be empty");
  }
  if (tokenizer == nullptr) return invalid_argument("the served model has no tokenizer");
  if (max_model_len < 2) {
    return invalid_argument("max_model_len must be at least 2, got " +
                            std::to_string(max_model_len));
  }
  ServedModel model;
  model.bos_token = special_token_text(*tokenizer, tokenizer->bos_id());
  model.eos_token = special_token_text(*tokenizer, tokenizer->eos_id());
  model.vocab_size = tokenizer->vocab_size();
  model.names = std::move(names);
  model.root = std::move(root);
  model.tokenizer = std::move(tokenizer);
  model.chat_template = std::move(chat_template);
  model.max_model_len = max_model_len;
  model.created = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  model.generation = generation;
  return model;
}

}  // namespace pagoda::api
