// The xgrammar objects behind src/structured's own types; included by src/structured's .cc
// files only, so no other part of Pagoda sees xgrammar.
#pragma once

#include <xgrammar/xgrammar.h>

#include <memory>

#include "structured/compiled_constraint.h"
#include "structured/token_vocabulary.h"

namespace pagoda::structured {

struct TokenVocabulary::Impl {
  xgrammar::TokenizerInfo info;
};

struct CompiledConstraint::Impl {
  xgrammar::CompiledGrammar grammar;
  // Keeps token_bytes() valid for as long as any matcher lives.
  std::shared_ptr<const TokenVocabulary> vocabulary;
};

}  // namespace pagoda::structured
