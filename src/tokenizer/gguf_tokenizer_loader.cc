#include "tokenizer/gguf_tokenizer_loader.h"

#include <set>

#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/gguf_pre_tokenizers.h"
#include "tokenizer/sentencepiece_merges.h"
#include "tokenizer/utf8.h"

namespace pagoda {
namespace {

// llama.cpp's token types.
constexpr std::int64_t kTokenTypeControl = 3;
constexpr std::int64_t kTokenTypeUserDefined = 4;

struct GgufVocab {
  std::vector<std::string> tokens;
  std::vector<std::int64_t> types;
};

bool spelled_in_alphabet(std::string_view token) {
  std::string bytes;
  return ByteLevelAlphabet::get().unspell(token, bytes);
}

std::optional<std::int32_t> token_id(const GgufFile& gguf, const char* key, std::size_t size) {
  const auto id = gguf.get_int(key);
  if (!id || *id < 0 || static_cast<std::size_t>(*id) >= size) return std::nullopt;
  return static_cast<std::int32_t>(*id);
}

// Control tokens become special added tokens, user-defined ones plain added tokens, as in
// transformers; a byte-level control token spelled outside the alphabet is a converter mislabel
// and stays an ordinary token. The named BOS/EOS/UNK/PAD tokens are special too. A user-defined
// token that the model respells (Gemma's runs of spaces) is no added token: transformers adds
// only user-defined tokens found in the vocabulary under their file spelling.
std::vector<AddedToken> added_tokens(const GgufVocab& vocab, bool byte_level,
                                     const std::set<std::int32_t>& named,
                                     const std::vector<std::string>* model_spelling = nullptr) {
  std::vector<AddedToken> out;
  for (std::size_t i = 0; i < vocab.tokens.size(); ++i) {
    const std::int64_t type = i < vocab.types.size() ? vocab.types[i] : 1;
    const auto id = static_cast<std::int32_t>(i);
    const bool control = (type == kTokenTypeControl || named.contains(id)) &&
                         (!byte_level || spelled_in_alphabet(vocab.tokens[i]));
    const bool user_defined =
        type == kTokenTypeUserDefined &&
        (model_spelling == nullptr || (*model_spelling)[i] == vocab.tokens[i]);
    if (control || user_defined) {
      out.push_back({id, vocab.tokens[i], control, false, false, false, false});
    }
  }
  return out;
}

StatusOr<std::unique_ptr<BpeModel>> byte_level_model(const GgufFile& gguf, const GgufVocab& vocab,
                                                     bool ignore_merges) {
  const auto merges = gguf.get_string_array("tokenizer.ggml.merges");
  if (!merges) {
    return invalid_argument(gguf.path() +
                            ": tokenizer.ggml.merges is missing; a \"gpt2\" "
                            "vocabulary needs its merges");
  }
  BpeModelConfig config;
  config.byte_level = true;
  config.ignore_merges = ignore_merges;
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
  for (std::size_t i = 0; i < vocab.tokens.size(); ++i) {
    // Tokens written in plain UTF-8 instead of the byte alphabet are respelled, as transformers
    // does.
    std::string spelled;
    if (spelled_in_alphabet(vocab.tokens[i])) {
      spelled = vocab.tokens[i];
    } else {
      alphabet.spell_all(vocab.tokens[i], spelled);
    }
    config.vocab.insert_or_assign(std::move(spelled), static_cast<std::int32_t>(i));
  }
  for (const std::string& merge : *merges) {
    const std::size_t space = merge.find(' ');
    if (space == std::string::npos) {
      return invalid_argument(gguf.path() + ": tokenizer.ggml.merges entry \"" + merge +
                              "\" is not two tokens separated by a space");
    }
    config.merges.emplace_back(merge.substr(0, space), merge.substr(space + 1));
  }
  return BpeModel::create(std::move(config), gguf.path());
}

StatusOr<std::unique_ptr<BpeModel>> sentencepiece_model(const GgufFile& gguf,
                                                        const GgufVocab& vocab) {
  const auto scores = gguf.get_float_array("tokenizer.ggml.scores");
  if (!scores || scores->size() != vocab.tokens.size()) {
    return invalid_argument(gguf.path() +
                            ": tokenizer.ggml.scores is missing or does not have "
                            "one score per token");
  }
  BpeModelConfig config;
  config.byte_fallback = true;
  config.fuse_unk = true;
  for (std::size_t i = 0; i < vocab.tokens.size(); ++i) {
    config.vocab.insert_or_assign(vocab.tokens[i], static_cast<std::int32_t>(i));
  }
  config.merge_ids = sentencepiece_merges(vocab.tokens, *scores);
  return BpeModel::create(std::move(config), gguf.path());
}

// Python's str.isspace, which decides what transformers treats as a whitespace-only token.
bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Gemma files store the pieces of two or more spaces as real spaces, while the text reaches the
// model with every space already "▁" (the normalizer below): such a piece is respelled as one
// "▁" per character, as transformers does.
std::string gemma_spelling(const std::string& token) {
  if (token.find(' ') == std::string::npos) return token;
  if (!is_valid_utf8(token)) return token;
  std::size_t chars = 0;
  for (std::size_t pos = 0; pos < token.size(); ++chars) {
    const auto lead = static_cast<unsigned char>(token[pos]);
    const std::size_t len = utf8_char_length(lead);
    char32_t c = len == 1 ? lead : lead & (0x7F >> len);
    for (std::size_t k = 1; k < len; ++k) c = (c << 6) | (token[pos + k] & 0x3F);
    if (!is_python_space(c)) return token;
    pos += len;
  }
  std::string out;
  for (std::size_t i = 0; i < chars; ++i) out += "\u2581";
  return out;
}

// Gemma (GGUF architectures gemma, gemma2, gemma3): SentencePiece pieces without merges and
// without a dummy prefix, read as transformers' GemmaTokenizer reads them. Merges are recovered as
// for Llama, but ranked by the merged piece's position in the file instead of its score (Gemma's
// scores do not follow its merge order; its file order does).
// `spelling` receives each piece as the model spells it.
StatusOr<std::unique_ptr<BpeModel>> gemma_model(const GgufFile& gguf, const GgufVocab& vocab,
                                                std::vector<std::string>& spelling) {
  spelling.resize(vocab.tokens.size());
  std::vector<double> positions(vocab.tokens.size());
  for (std::size_t i = 0; i < vocab.tokens.size(); ++i) {
    spelling[i] = gemma_spelling(vocab.tokens[i]);
    positions[i] = -static_cast<double>(i);
  }
  BpeModelConfig config;
  config.byte_fallback = true;
  config.fuse_unk = true;
  const auto unk = token_id(gguf, "tokenizer.ggml.unknown_token_id", spelling.size());
  if (unk) config.unk_token = spelling[*unk];
  for (std::size_t i = 0; i < spelling.size(); ++i) {
    config.vocab.insert_or_assign(spelling[i], static_cast<std::int32_t>(i));
  }
  config.merge_ids = sentencepiece_merges(spelling, positions);
  return BpeModel::create(std::move(config), gguf.path());
}

// Every space becomes "▁" before the text is cut, so GemmaTokenizer's Split(" ") pre-tokenizer
// never matches: each run of text between added tokens is one BPE word.
Normalizer gemma_normalizer() {
  NormalizerStep step;
  step.kind = NormalizerStep::Kind::kReplace;
  step.pattern = " ";
  step.content = "\u2581";
  return Normalizer({std::move(step)});
}

StatusOr<PreTokenizer> metaspace_pre_tokenizer(bool add_space_prefix) {
  PreTokenizerStep step;
  step.kind = PreTokenizerStep::Kind::kMetaspace;
  step.replacement = "\u2581";
  step.prepend_scheme = add_space_prefix ? PrependScheme::kFirst : PrependScheme::kNever;
  step.split = false;
  return PreTokenizer::create({std::move(step)});
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> load_tokenizer_from_gguf(const GgufFile& gguf) {
  const std::string& source = gguf.path();
  const std::string model = gguf.get_string("tokenizer.ggml.model").value_or("");
  if (model != "gpt2" && model != "llama") {
    return unimplemented(source + ": tokenizer.ggml.model \"" + model +
                         "\" is not supported; Pagoda reads \"gpt2\" (byte-level BPE) and "
                         "\"llama\" (SentencePiece BPE) vocabularies");
  }
  const std::string arch = gguf.get_string("general.architecture").value_or("");
  if (model == "llama" && arch == "phi3") {
    return unimplemented(source + ": the " + arch +
                         " SentencePiece variant is not supported; "
                         "load the model's tokenizer.json instead");
  }
  const bool gemma = model == "llama" && (arch == "gemma" || arch == "gemma2" || arch == "gemma3");
  GgufVocab vocab;
  auto tokens = gguf.get_string_array("tokenizer.ggml.tokens");
  if (!tokens || tokens->empty()) {
    return invalid_argument(source + ": tokenizer.ggml.tokens is missing or empty");
  }
  vocab.tokens = std::move(*tokens);
  vocab.types =
      gguf.get_int_array("tokenizer.ggml.token_type").value_or(std::vector<std::int64_t>{});
  const bool byte_level = model == "gpt2";

  TokenizerParts parts;
  std::vector<std::string> gemma_spelled;
  if (byte_level) {
    PAGODA_ASSIGN_OR_RETURN(
        GgufPreTokenizer pre,
        gguf_pre_tokenizer(gguf.get_string("tokenizer.ggml.pre").value_or("default"), source));
    PAGODA_ASSIGN_OR_RETURN(parts.pre_tokenizer, PreTokenizer::create(std::move(pre.steps)));
    PAGODA_ASSIGN_OR_RETURN(parts.model, byte_level_model(gguf, vocab, pre.ignore_merges));
  } else if (gemma) {
    PAGODA_ASSIGN_OR_RETURN(parts.model, gemma_model(gguf, vocab, gemma_spelled));
    parts.normalizer = gemma_normalizer();
    parts.decoder.kind = DecoderConfig::Kind::kPieces;
    parts.decoder.replacements.emplace_back("\u2581", " ");
    parts.decoder.byte_fallback = true;
  } else {
    PAGODA_ASSIGN_OR_RETURN(
        parts.pre_tokenizer,
        metaspace_pre_tokenizer(gguf.get_bool("tokenizer.ggml.add_space_prefix").value_or(true)));
    PAGODA_ASSIGN_OR_RETURN(parts.model, sentencepiece_model(gguf, vocab));
    parts.decoder.kind = DecoderConfig::Kind::kPieces;
    parts.decoder.replacements.emplace_back("\u2581", " ");
    parts.decoder.byte_fallback = true;
    parts.decoder.strip_start = 1;
  }

  const std::size_t n = vocab.tokens.size();
  parts.bos_id = token_id(gguf, "tokenizer.ggml.bos_token_id", n);
  parts.eos_id = token_id(gguf, "tokenizer.ggml.eos_token_id", n);
  parts.pad_id = token_id(gguf, "tokenizer.ggml.padding_token_id", n);
  std::set<std::int32_t> named;
  for (const auto& id : {parts.bos_id, parts.eos_id, parts.pad_id,
                         token_id(gguf, "tokenizer.ggml.unknown_token_id", n)}) {
    if (id) named.insert(*id);
  }
  parts.added =
      AddedVocabulary(added_tokens(vocab, byte_level, named, gemma ? &gemma_spelled : nullptr));
  // llama.cpp (and transformers) add BOS to a SentencePiece vocabulary unless told otherwise.
  if (gguf.get_bool("tokenizer.ggml.add_bos_token").value_or(!byte_level) && parts.bos_id) {
    parts.prefix_ids.push_back(*parts.bos_id);
  }
  if (gguf.get_bool("tokenizer.ggml.add_eos_token").value_or(false) && parts.eos_id) {
    parts.suffix_ids.push_back(*parts.eos_id);
  }
  PAGODA_ASSIGN_OR_RETURN(auto tokenizer, BpeTokenizer::create(std::move(parts), source));
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

}  // namespace pagoda
