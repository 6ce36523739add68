// A SentencePiece BPE vocabulary (GGUF `tokenizer.ggml.model == "llama"`) stores scores, not
// merges. Merges are recovered the way transformers does for the same file, so that merging by
// rank reproduces its ids: every split of a token into two vocabulary tokens is a merge, ordered
// by the token's score (best first), then by longer left part, then longer right part; ties keep
// vocabulary order. They come as ids, so a 262k vocabulary loads without a string per merge.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/bpe_model.h"

namespace pagoda {

/// Merges in rank order for `tokens` with `scores` (same length). A token spelled twice stands
/// for its last id, as in a Python dict built from the list.
std::vector<MergeIds> sentencepiece_merges(const std::vector<std::string>& tokens,
                                           const std::vector<double>& scores);

}  // namespace pagoda
