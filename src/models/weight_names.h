// GGUF tensor names to Hugging Face names: the one place the two vocabularies meet, so model code
// looks every weight up by its HF name whatever file it came from.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pagoda::models {

/// The HF name of a GGUF tensor ("blk.3.attn_q.weight" ->
/// "model.layers.3.self_attn.q_proj.weight") in a file of GGUF `general.architecture`
/// `architecture` (a few names mean another HF tensor in Gemma 3); nullopt for names the table
/// does not know.
std::optional<std::string> hf_name_from_gguf(std::string_view gguf_name,
                                             std::string_view architecture = {});

}  // namespace pagoda::models
