#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_assets.h"

namespace pagoda::cli {

namespace {

StatusOr<std::vector<std::int32_t>> parse_ids(const std::string& text, std::int32_t vocab_size) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_array()) {
    return invalid_argument("--ids must be a JSON array of token ids, e.g. \"[1, 2, 3]\"");
  }
  std::vector<std::int32_t> ids;
  for (const auto& v : j) {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 ||
        v.get<std::int64_t>() >= vocab_size) {
      return invalid_argument("--ids: " + v.dump() + " is not a token id in [0, " +
                              std::to_string(vocab_size) + ")");
    }
    ids.push_back(v.get<std::int32_t>());
  }
  return ids;
}

}  // namespace

CLI::App* TokenizeCommand::add_to(CLI::App& app) {
  CLI::App* sub =
      app.add_subcommand("tokenize", "Turn text into token ids (JSON), or ids into text");
  sub->add_option("model", model, "A .gguf file or a Hugging Face model folder (default model)");
  text_option = sub->add_option("--text", text, "Text to encode; prints the ids as JSON");
  ids_option = sub->add_option("--ids", ids, "A JSON array of ids to decode; prints the text");
  text_option->excludes(ids_option);
  sub->add_flag("--no-special-tokens", no_special_tokens,
                "Do not add the BOS/EOS tokens the tokenizer would add");
  sub->add_flag("--plain-special-text", plain_special_text,
                "Treat special-token text such as <|im_start|> in --text as plain text");
  sub->add_flag("--skip-special-tokens", skip_special_tokens,
                "With --ids: leave special tokens out of the text");
  return sub;
}

int TokenizeCommand::run(const char* argv0) const {
  const bool decoding = ids_option->count() > 0;
  if (!decoding && text_option->count() == 0) {
    return report_error(invalid_argument("give --text TEXT or --ids JSON"));
  }
  auto opened = open_model_and_tokenizer(model, argv0);
  if (!opened.ok()) return report_error(opened.status());
  const Tokenizer& tokenizer = *opened->tokenizer;

  if (decoding) {
    auto parsed = parse_ids(ids, tokenizer.vocab_size());
    if (!parsed.ok()) return report_error(parsed.status());
    std::string out = tokenizer.decode(*parsed, {.skip_special_tokens = skip_special_tokens});
    std::cout << nlohmann::json(out).dump() << "\n";
    return 0;
  }
  EncodeOptions options{.add_special_tokens = !no_special_tokens,
                        .parse_special = !plain_special_text};
  std::cout << nlohmann::json(tokenizer.encode(text, options)).dump() << "\n";
  return 0;
}

}  // namespace pagoda::cli
