#include "tokenizer/tokenizer_json_components.h"

#include <nlohmann/json.hpp>
#include <optional>

namespace pagoda {
namespace {

using nlohmann::json;

std::string type_of(const json& j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>()
                                                                      : std::string("(none)");
}

Status unsupported(const std::string& source, const std::string& section, const std::string& type,
                   const std::string& supported) {
  return unimplemented(source + ": " + section + " type \"" + type +
                       "\" is not supported (supported: " + supported + ")");
}

// {"String": s} or {"Regex": r} -> (text, is_regex).
StatusOr<std::pair<std::string, bool>> read_pattern(const json& j, const std::string& source) {
  if (j.is_object() && j.contains("String"))
    return std::make_pair(j["String"].get<std::string>(), false);
  if (j.is_object() && j.contains("Regex"))
    return std::make_pair(j["Regex"].get<std::string>(), true);
  return invalid_argument(source + ": pattern " + j.dump() +
                          " must be {\"String\": ...} or {\"Regex\": ...}");
}

StatusOr<std::shared_ptr<const UnicodeRegex>> compile(const std::string& pattern, bool literal,
                                                      const std::string& source) {
  auto regex = UnicodeRegex::compile(pattern, literal);
  if (!regex.ok()) return Status(regex.status().code(), source + ": " + regex.status().message());
  return regex;
}

StatusOr<SplitBehavior> read_behavior(const std::string& name, const std::string& source) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return invalid_argument(source + ": unknown Split behavior \"" + name + "\"");
}

std::optional<NormalizationForm> read_normalization_form(const std::string& type) {
  if (type == "NFC") return NormalizationForm::kNfc;
  if (type == "NFD") return NormalizationForm::kNfd;
  if (type == "NFKC") return NormalizationForm::kNfkc;
  if (type == "NFKD") return NormalizationForm::kNfkd;
  return std::nullopt;
}

// Real files nest Sequences once or twice; the bound keeps a hostile file from exhausting the
// stack.
constexpr int kMaxNormalizerDepth = 32;

Status add_normalizer_steps(const json& j, const std::string& source,
                            std::vector<NormalizerStep>& steps, int depth = 0) {
  const std::string type = type_of(j);
  if (type == "Sequence") {
    if (depth >= kMaxNormalizerDepth) {
      return invalid_argument(source + ": normalizer Sequences are nested more than " +
                              std::to_string(kMaxNormalizerDepth) + " deep");
    }
    for (const json& child : j.at("normalizers")) {
      PAGODA_RETURN_IF_ERROR(add_normalizer_steps(child, source, steps, depth + 1));
    }
    return Status::ok_status();
  }
  NormalizerStep step;
  if (type == "Prepend") {
    step.kind = NormalizerStep::Kind::kPrepend;
    step.content = j.at("prepend").get<std::string>();
  } else if (type == "Replace") {
    PAGODA_ASSIGN_OR_RETURN(auto pattern, read_pattern(j.at("pattern"), source));
    step.kind = NormalizerStep::Kind::kReplace;
    if (pattern.second) {
      PAGODA_ASSIGN_OR_RETURN(step.regex, compile(pattern.first, false, source));
    } else {
      step.pattern = pattern.first;
    }
    step.content = j.at("content").get<std::string>();
  } else if (const auto form = read_normalization_form(type)) {
    step.kind = NormalizerStep::Kind::kUnicode;
    step.form = *form;
  } else if (type == "Lowercase") {
    step.kind = NormalizerStep::Kind::kLowercase;
  } else if (type == "Strip") {
    step.kind = NormalizerStep::Kind::kStrip;
    step.strip_left = j.value("strip_left", true);
    step.strip_right = j.value("strip_right", true);
  } else if (type == "StripAccents") {
    step.kind = NormalizerStep::Kind::kStripAccents;
  } else {
    return unsupported(source, "normalizer", type,
                       "Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Replace, "
                       "Prepend");
  }
  steps.push_back(std::move(step));
  return Status::ok_status();
}

Status add_pre_tokenizer_steps(const json& j, const std::string& source,
                               std::vector<PreTokenizerStep>& steps) {
  const std::string type = type_of(j);
  PreTokenizerStep step;
  if (type == "Sequence") {
    for (const json& child : j.at("pretokenizers")) {
      PAGODA_RETURN_IF_ERROR(add_pre_tokenizer_steps(child, source, steps));
    }
    return Status::ok_status();
  }
  if (type == "Split") {
    PAGODA_ASSIGN_OR_RETURN(auto pattern, read_pattern(j.at("pattern"), source));
    PAGODA_ASSIGN_OR_RETURN(step.regex, compile(pattern.first, !pattern.second, source));
    PAGODA_ASSIGN_OR_RETURN(step.behavior,
                            read_behavior(j.at("behavior").get<std::string>(), source));
    step.invert = j.value("invert", false);
  } else if (type == "Digits") {
    const bool individual = j.value("individual_digits", false);
    PAGODA_ASSIGN_OR_RETURN(step.regex,
                            compile(individual ? R"(\p{N})" : R"(\p{N}+)", false, source));
  } else if (type == "ByteLevel") {
    step.kind = PreTokenizerStep::Kind::kByteLevel;
    step.add_prefix_space = j.value("add_prefix_space", true);
    if (j.value("use_regex", true)) {
      PAGODA_ASSIGN_OR_RETURN(step.regex, compile(std::string(kGpt2SplitRegex), false, source));
    }
  } else if (type == "Metaspace") {
    step.kind = PreTokenizerStep::Kind::kMetaspace;
    step.replacement = j.value("replacement", std::string("\u2581"));
    step.split = j.value("split", true);
    const std::string scheme =
        j.contains("prepend_scheme")
            ? j["prepend_scheme"].get<std::string>()
            : (j.value("add_prefix_space", true) ? std::string("always") : std::string("never"));
    if (scheme == "always") {
      step.prepend_scheme = PrependScheme::kAlways;
    } else if (scheme == "first") {
      step.prepend_scheme = PrependScheme::kFirst;
    } else if (scheme == "never") {
      step.prepend_scheme = PrependScheme::kNever;
    } else {
      return invalid_argument(source + ": unknown Metaspace prepend_scheme \"" + scheme + "\"");
    }
  } else {
    return unsupported(source, "pre_tokenizer", type,
                       "Sequence, Split, Digits, ByteLevel, Metaspace");
  }
  steps.push_back(std::move(step));
  return Status::ok_status();
}

Status add_decoder_step(const json& j, const std::string& source, DecoderConfig& config,
                        bool& fused) {
  const std::string type = type_of(j);
  const auto out_of_order = [&] {
    return unimplemented(source + ": decoder \"" + type +
                         "\" after Fuse/Strip is not supported; expected the order Replace, "
                         "ByteFallback, Fuse, Strip");
  };
  if (type == "Replace") {
    if (fused) return out_of_order();
    PAGODA_ASSIGN_OR_RETURN(auto pattern, read_pattern(j.at("pattern"), source));
    if (pattern.second) return unsupported(source, "decoder", "Replace with a Regex", "String");
    config.replacements.emplace_back(pattern.first, j.at("content").get<std::string>());
  } else if (type == "ByteFallback") {
    if (fused) return out_of_order();
    config.byte_fallback = true;
  } else if (type == "Fuse") {
    fused = true;
  } else if (type == "Strip") {
    const std::string content = j.at("content").get<std::string>();
    if (j.value("stop", 0) != 0 || content.size() != 1 || !fused) {
      return unimplemented(source +
                           ": decoder Strip is supported only after Fuse, for one ASCII "
                           "character, with stop = 0");
    }
    config.strip_content = content[0];
    config.strip_start = j.value("start", 0);
  } else {
    return unsupported(source, "decoder", type,
                       "ByteLevel, Metaspace, or a Sequence of Replace, ByteFallback, Fuse, Strip");
  }
  return Status::ok_status();
}

}  // namespace

StatusOr<Normalizer> parse_normalizer(const json& j, const std::string& source) {
  std::vector<NormalizerStep> steps;
  if (!j.is_null()) PAGODA_RETURN_IF_ERROR(add_normalizer_steps(j, source, steps));
  return Normalizer(std::move(steps));
}

StatusOr<PreTokenizer> parse_pre_tokenizer(const json& j, const std::string& source) {
  std::vector<PreTokenizerStep> steps;
  if (!j.is_null()) PAGODA_RETURN_IF_ERROR(add_pre_tokenizer_steps(j, source, steps));
  auto pre = PreTokenizer::create(std::move(steps));
  if (!pre.ok()) return Status(pre.status().code(), source + ": " + pre.status().message());
  return pre;
}

StatusOr<DecoderConfig> parse_decoder(const json& j, const std::string& source) {
  DecoderConfig config;
  const std::string type = type_of(j);
  if (type == "ByteLevel") return config;
  config.kind = DecoderConfig::Kind::kPieces;
  if (type == "Metaspace") {
    // Metaspace decoding: "▁" back to " ", and the space it prepended dropped again.
    config.replacements.emplace_back(j.value("replacement", std::string("\u2581")), " ");
    const bool prepends = j.contains("prepend_scheme") ? j["prepend_scheme"] != "never"
                                                       : j.value("add_prefix_space", true);
    config.strip_start = prepends ? 1 : 0;
    return config;
  }
  if (type == "Sequence") {
    const json& children = j.at("decoders");
    if (children.size() == 1 && type_of(children[0]) == "ByteLevel") return DecoderConfig{};
    bool fused = false;
    for (const json& child : children) {
      PAGODA_RETURN_IF_ERROR(add_decoder_step(child, source, config, fused));
    }
    if (!fused) {
      return unimplemented(source + ": a decoder Sequence without Fuse is not supported");
    }
    return config;
  }
  return unsupported(source, "decoder", type,
                     "ByteLevel, Metaspace, or a Sequence of Replace, ByteFallback, Fuse, Strip");
}

Status parse_post_processor(const json& j, const std::string& source,
                            std::vector<std::int32_t>& prefix_ids,
                            std::vector<std::int32_t>& suffix_ids) {
  const std::string type = type_of(j);
  if (j.is_null() || type == "ByteLevel") return Status::ok_status();
  if (type == "Sequence") {
    for (const json& child : j.at("processors")) {
      PAGODA_RETURN_IF_ERROR(parse_post_processor(child, source, prefix_ids, suffix_ids));
    }
    return Status::ok_status();
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    prefix_ids.push_back(j.at("cls").at(1).get<std::int32_t>());
    suffix_ids.push_back(j.at("sep").at(1).get<std::int32_t>());
    return Status::ok_status();
  }
  if (type != "TemplateProcessing") {
    return unsupported(
        source, "post_processor", type,
        "TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing, Sequence");
  }
  bool seen_sequence = false;
  for (const json& item : j.at("single")) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    const std::string name = item.at("SpecialToken").at("id").get<std::string>();
    const json& special = j.at("special_tokens");
    if (!special.contains(name)) {
      return invalid_argument(source + ": post_processor template uses \"" + name +
                              "\", which is missing from its special_tokens");
    }
    for (const json& id : special[name].at("ids")) {
      (seen_sequence ? suffix_ids : prefix_ids).push_back(id.get<std::int32_t>());
    }
  }
  return Status::ok_status();
}

}  // namespace pagoda
