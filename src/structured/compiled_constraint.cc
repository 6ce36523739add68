#include "structured/compiled_constraint.h"

#include "structured/xgrammar_handles.h"

namespace pagoda::structured {

CompiledConstraint::CompiledConstraint(ConstraintKind kind, std::unique_ptr<Impl> impl)
    : kind_(kind), impl_(std::move(impl)) {}

CompiledConstraint::~CompiledConstraint() = default;

std::size_t CompiledConstraint::memory_bytes() const {
  return impl_->grammar.MemorySizeBytes();
}

std::int64_t CompiledConstraint::vocab_size() const {
  return impl_->vocabulary->vocab_size();
}

const TokenVocabulary& CompiledConstraint::vocabulary() const {
  return *impl_->vocabulary;
}

}  // namespace pagoda::structured
