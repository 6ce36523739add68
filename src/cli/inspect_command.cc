#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_assets.h"
#include "model/inspect.h"

namespace pagoda::cli {

namespace {

nlohmann::ordered_json config_json(const ModelConfig& c) {
  nlohmann::ordered_json j;
  j["architecture"] = c.architecture;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["vocab_size"] = c.vocab_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = {{"type", rope_scaling_type_name(c.rope_scaling.type)},
                       {"factor", c.rope_scaling.factor}};
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["attention_bias"] = c.attention_bias;
  j["bos_token_id"] = c.bos_token_id ? nlohmann::ordered_json(*c.bos_token_id) : nullptr;
  j["eos_token_ids"] = c.eos_token_ids;
  return j;
}

// The same facts as the text summary, for scripts and tests.
nlohmann::ordered_json model_json(const ModelFiles& files) {
  nlohmann::ordered_json j;
  j["path"] = files.path;
  j["format"] = files.format == ModelFormat::kGguf ? "gguf" : "huggingface";
  j["config"] = config_json(files.config);
  j["quantization"] = files.quantization.summary();
  j["has_chat_template"] = files.chat_template.has_value();
  auto& tensors = j["tensors"] = nlohmann::ordered_json::array();
  for (const ModelTensor& t : files.tensors) {
    tensors.push_back({{"name", t.name}, {"type", dtype_name(t.dtype)}, {"shape", t.shape}});
  }
  return j;
}

}  // namespace

CLI::App* InspectCommand::add_to(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "inspect", "Print a model's architecture, sizes, tokenizer and every tensor");
  sub->add_option("model", model, "A .gguf file or a Hugging Face model folder (default model)");
  sub->add_flag("--json", json, "Print JSON instead of text");
  return sub;
}

int InspectCommand::run(const char* argv0) const {
  auto path = resolve_model_path(model, argv0);
  if (!path.ok()) return report_error(path.status());
  auto files = open_model_files(*path);
  if (!files.ok()) return report_error(files.status());
  if (json) {
    std::cout << model_json(*files).dump(2) << "\n";
    return 0;
  }
  Status status = write_model_summary(*files, std::cout);
  return status.ok() ? 0 : report_error(status);
}

}  // namespace pagoda::cli
