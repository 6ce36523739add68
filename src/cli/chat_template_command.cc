#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_assets.h"

namespace pagoda::cli {

namespace {

StatusOr<nlohmann::ordered_json> parse_json_flag(const std::string& flag, const std::string& text,
                                                 nlohmann::ordered_json::value_t want) {
  auto j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || j.type() != want) {
    return invalid_argument(flag + " must be a JSON " +
                            (want == nlohmann::ordered_json::value_t::array ? "array" : "object"));
  }
  return j;
}

std::string piece_or_empty(const Tokenizer& tokenizer, std::optional<std::int32_t> id) {
  if (!id) return {};
  return std::string(tokenizer.token_to_piece(*id).value_or(""));
}

}  // namespace

CLI::App* ChatTemplateCommand::add_to(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "chat-template", "Render a conversation into a prompt with the model's chat template");
  sub->add_option("model", model, "A .gguf file or a Hugging Face model folder (default model)");
  sub->add_option("--messages", messages,
                  R"(JSON array of messages, e.g. '[{"role":"user","content":"Hi"}]')")
      ->required();
  sub->add_option("--tools", tools, "JSON array of tool definitions");
  sub->add_option("--chat-template", chat_template_path, "A Jinja template file to use instead");
  sub->add_option("--kwargs", kwargs,
                  R"(JSON object of extra template variables, e.g. '{"enable_thinking":false}')");
  sub->add_flag("--no-generation-prompt", no_generation_prompt,
                "Do not end with the assistant's turn header");
  sub->add_flag("--tokenize", tokenize, "Also print the prompt's token ids");
  return sub;
}

int ChatTemplateCommand::run(const char* argv0) const {
  auto opened = open_model_and_tokenizer(model, argv0);
  if (!opened.ok()) return report_error(opened.status());
  const ModelFiles& files = *opened->files;
  const Tokenizer& tokenizer = *opened->tokenizer;
  auto chat_template = load_model_chat_template(files, chat_template_path);
  if (!chat_template.ok()) return report_error(chat_template.status());

  ChatTemplateInputs inputs;
  auto parsed_messages =
      parse_json_flag("--messages", messages, nlohmann::ordered_json::value_t::array);
  if (!parsed_messages.ok()) return report_error(parsed_messages.status());
  inputs.messages = std::move(*parsed_messages);
  if (!tools.empty()) {
    auto parsed = parse_json_flag("--tools", tools, nlohmann::ordered_json::value_t::array);
    if (!parsed.ok()) return report_error(parsed.status());
    inputs.tools = std::move(*parsed);
  }
  if (!kwargs.empty()) {
    auto parsed = parse_json_flag("--kwargs", kwargs, nlohmann::ordered_json::value_t::object);
    if (!parsed.ok()) return report_error(parsed.status());
    inputs.extra_kwargs = std::move(*parsed);
  }
  inputs.add_generation_prompt = !no_generation_prompt;
  inputs.bos_token = piece_or_empty(tokenizer, tokenizer.bos_id());
  inputs.eos_token = piece_or_empty(tokenizer, tokenizer.eos_id());

  auto prompt = chat_template->render(inputs);
  if (!prompt.ok()) return report_error(prompt.status());
  std::cout << *prompt;
  if (tokenize) {
    // The template already wrote any BOS, so the tokenizer adds none.
    auto ids = tokenizer.encode(*prompt, {.add_special_tokens = false, .parse_special = true});
    std::cout << "\n" << nlohmann::json(ids).dump() << "\n";
  }
  return 0;
}

}  // namespace pagoda::cli
