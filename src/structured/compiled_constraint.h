// A constraint compiled against one vocabulary: xgrammar's grammar with its per-token mask cache,
// shared read-only by every request that uses the same spec (ConstraintCompiler caches it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "structured/constraint_spec.h"

namespace pagoda::structured {

class TokenVocabulary;

class CompiledConstraint {
 public:
  struct Impl;  // xgrammar's compiled grammar (xgrammar_handles.h)
  CompiledConstraint(ConstraintKind kind, std::unique_ptr<Impl> impl);
  ~CompiledConstraint();
  CompiledConstraint(const CompiledConstraint&) = delete;
  CompiledConstraint& operator=(const CompiledConstraint&) = delete;

  ConstraintKind kind() const { return kind_; }
  /// Approximate bytes held (what the compiler's cache counts).
  std::size_t memory_bytes() const;
  /// Logits columns the masks cover.
  std::int64_t vocab_size() const;
  /// The vocabulary it was compiled for (token bytes for the reasoning gate).
  const TokenVocabulary& vocabulary() const;
  const Impl& impl() const { return *impl_; }

 private:
  ConstraintKind kind_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::structured
