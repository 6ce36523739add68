// Readers for the pipeline sections of a Hugging Face tokenizer.json (normalizer, pre_tokenizer,
// post_processor, decoder). Each accepts the component types Pagoda implements and answers
// UNIMPLEMENTED, naming the type, for the others, so a tokenizer never silently tokenizes wrong.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "pagoda/status.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/token_decoder.h"

namespace pagoda {

/// The "normalizer" section (null allowed); `source` names the file in errors.
StatusOr<Normalizer> parse_normalizer(const nlohmann::json& json, const std::string& source);
/// The "pre_tokenizer" section (null allowed).
StatusOr<PreTokenizer> parse_pre_tokenizer(const nlohmann::json& json, const std::string& source);
/// The "decoder" section.
StatusOr<DecoderConfig> parse_decoder(const nlohmann::json& json, const std::string& source);
/// The "post_processor" section: the ids it puts before and after a single sequence.
Status parse_post_processor(const nlohmann::json& json, const std::string& source,
                            std::vector<std::int32_t>& prefix_ids,
                            std::vector<std::int32_t>& suffix_ids);

}  // namespace pagoda
