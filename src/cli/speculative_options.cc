#include "cli/speculative_options.h"

#include "spec/speculative_config.h"

namespace pagoda::cli {

void SpeculativeOptions::add_to(CLI::App& app) {
  app.add_option("--speculative-config", json,
                 "Speculative decoding as JSON, e.g. "
                 "'{\"method\":\"ngram\",\"num_speculative_tokens\":4,\"prompt_lookup_min\":2,"
                 "\"prompt_lookup_max\":4}' or "
                 "'{\"method\":\"draft_model\",\"model\":\"PATH\",\"num_speculative_tokens\":4}'");
}

Status SpeculativeOptions::apply(engine::EngineConfig& config) const {
  if (json.empty()) return Status::ok_status();
  PAGODA_ASSIGN_OR_RETURN(config.speculative, spec::parse_speculative_config(json));
  return Status::ok_status();
}

}  // namespace pagoda::cli
