// A SentencePiece BPE vocabulary (GGUF `tokenizer.ggml.model == "llama"`) stores scores, not
// merges. Merges are recovered the way transformers does for the same file, so that merging by
// rank reproduces its ids: every split of a token into two vocabulary tokens is a merge, ordered
// by the token's score (best first), then by longer left part, then longer right part; ties keep
// vocabulary order.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace pagoda {

/// Merges in rank order for `tokens` with `scores` (same length).
std::vector<std::pair<std::string, std::string>> sentencepiece_merges(
    const std::vector<std::string>& tokens, const std::vector<double>& scores);

}  // namespace pagoda
