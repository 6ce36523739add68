#include "backend/cpu/embedding.h"

#include <optional>
#include <span>
#include <vector>

#include "backend/cpu/interleaved_rows.h"
#include "backend/cpu/row_decoder.h"
#include "common/check.h"
#include "model/dequantize.h"

namespace pagoda::cpu {

namespace {

void check_token(const TensorView& table, std::int32_t id) {
  PAGODA_CHECK(id >= 0 && id < table.num_rows)
      << "token id " << id << " outside the vocabulary of " << table.num_rows;
}

}  // namespace

void embedding(const TensorView& table, const std::int32_t* token_ids, std::int64_t num_tokens,
               float* out) {
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    check_token(table, token_ids[t]);
    decode_row(table, token_ids[t], 0, table.num_cols, out + t * table.num_cols);
  }
}

void embedding_reference(const TensorView& table, const std::int32_t* token_ids,
                         std::int64_t num_tokens, float* out) {
  const std::optional<std::uint64_t> row_bytes = dtype_num_bytes(table.dtype, table.num_cols);
  PAGODA_CHECK(row_bytes.has_value())
      << table.num_cols << " " << dtype_name(table.dtype) << " columns";
  std::vector<std::uint8_t> scratch;  // an interleaved table's row
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    check_token(table, token_ids[t]);
    const Status status =
        dequantize(table.dtype, std::span(gguf_row(table, token_ids[t], scratch), *row_bytes),
                   std::span(out + t * table.num_cols, static_cast<std::size_t>(table.num_cols)));
    PAGODA_CHECK(status.ok()) << status.to_string();
  }
}

}  // namespace pagoda::cpu
