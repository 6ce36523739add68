// The tokenizer contract: text to token ids and back, the way Hugging Face `tokenizers` does it for
// the same tokenizer.json, so a prompt costs the same tokens here as in the model's reference.
// Implementations live in src/tokenizer (byte-level BPE for the GPT-2 family, SentencePiece-style
// BPE for the Llama 2 family); loaders build them from tokenizer.json or from GGUF metadata.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pagoda/status.h"

namespace pagoda {

/// How encode() treats special tokens.
struct EncodeOptions {
  /// Adds what the tokenizer's post-processor adds (BOS and/or EOS), as `add_special_tokens` does.
  bool add_special_tokens = true;
  /// True: text like "<|im_start|>" becomes its special id. False: special-token text is plain text
  /// (user input must not forge control tokens). Non-special added tokens match either way.
  bool parse_special = true;
};

/// How decode() treats special tokens.
struct DecodeOptions {
  /// Leaves out tokens marked special (BOS, EOS, chat markers).
  bool skip_special_tokens = false;
};

/// Decodes one id at a time; everything returned is final. See IncrementalDetokenizer.
class DecodeStream {
 public:
  virtual ~DecodeStream() = default;
  /// Feeds one id; returns the text no later id can change (possibly empty).
  virtual std::string push(std::int32_t id) = 0;
  /// Ends the sequence; returns the text that was held back.
  virtual std::string finish() = 0;
};

/// A loaded tokenizer. Thread-safe: every method is const and may run concurrently.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// Token ids for `text`. Invalid UTF-8 is read as if each bad sequence were U+FFFD.
  virtual std::vector<std::int32_t> encode(std::string_view text,
                                           const EncodeOptions& options = {}) const = 0;
  /// Text for `ids`; ids outside the vocabulary are skipped, bad byte sequences become U+FFFD.
  virtual std::string decode(std::span<const std::int32_t> ids,
                             const DecodeOptions& options = {}) const = 0;
  /// A fresh streaming decoder whose output, concatenated, equals decode() of the same ids.
  virtual std::unique_ptr<DecodeStream> start_decode(const DecodeOptions& options = {}) const = 0;

  /// One more than the largest token id.
  virtual std::int32_t vocab_size() const = 0;
  /// The token's spelling in the vocabulary (e.g. "Ġhello", "▁hello", "<0x0A>"), if the id exists.
  virtual std::optional<std::string_view> token_to_piece(std::int32_t id) const = 0;
  /// The id whose vocabulary spelling is `piece`.
  virtual std::optional<std::int32_t> piece_to_token(std::string_view piece) const = 0;
  /// Whether `id` is a special token (skipped by skip_special_tokens).
  virtual bool is_special(std::int32_t id) const = 0;

  /// Beginning-of-sequence id, if the tokenizer names one.
  virtual std::optional<std::int32_t> bos_id() const = 0;
  /// End-of-sequence id, if the tokenizer names one.
  virtual std::optional<std::int32_t> eos_id() const = 0;
  /// Padding id, if the tokenizer names one.
  virtual std::optional<std::int32_t> pad_id() const = 0;
};

/// Loads a Hugging Face tokenizer.json; `tokenizer_config_path` (may be empty) names BOS/EOS/PAD
/// and may set add_bos_token / add_eos_token. Unsupported models give UNIMPLEMENTED.
StatusOr<std::unique_ptr<Tokenizer>> load_tokenizer_json(const std::string& tokenizer_json_path,
                                                         const std::string& tokenizer_config_path);

/// load_tokenizer_json on the files' text: a tokenizer.json and, when given, a
/// tokenizer_config.json; `source` and `config_source` name them in errors.
StatusOr<std::unique_ptr<Tokenizer>> parse_tokenizer_json(
    std::string_view tokenizer_json, const std::string& source,
    std::optional<std::string_view> tokenizer_config_json = std::nullopt,
    const std::string& config_source = "tokenizer_config.json");

}  // namespace pagoda
