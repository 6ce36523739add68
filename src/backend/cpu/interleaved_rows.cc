#include "backend/cpu/interleaved_rows.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "common/check.h"

namespace pagoda::cpu {

namespace {

constexpr std::array<InterleaveSegment, 2> kQ8_0{{{0, 2, 2}, {2, 32, 4}}};
constexpr std::array<InterleaveSegment, 2> kQ4_0{{{0, 2, 2}, {2, 16, 4}}};
constexpr std::array<InterleaveSegment, 3> kQ4_1{{{0, 2, 2}, {2, 2, 2}, {4, 16, 4}}};
constexpr std::array<InterleaveSegment, 3> kQ5_0{{{0, 2, 2}, {2, 4, 4}, {6, 16, 4}}};
constexpr std::array<InterleaveSegment, 4> kQ5_1{{{0, 2, 2}, {2, 2, 2}, {4, 4, 4}, {8, 16, 4}}};
constexpr std::array<InterleaveSegment, 4> kQ4_K{{{0, 2, 2}, {2, 2, 2}, {4, 12, 4}, {16, 128, 4}}};
constexpr std::array<InterleaveSegment, 5> kQ5_K{
    {{0, 2, 2}, {2, 2, 2}, {4, 12, 4}, {16, 32, 4}, {48, 128, 4}}};
constexpr std::array<InterleaveSegment, 6> kQ6_K{
    {{208, 2, 2}, {192, 16, 1}, {0, 64, 4}, {128, 32, 4}, {64, 64, 4}, {160, 32, 4}}};

// Calls move(panel_offset, row_offset, bytes) for every unit of group g of a panel's row r: the
// unit's place in the panel and in the GGUF row.
template <typename Move>
void for_each_unit(std::span<const InterleaveSegment> segments, std::size_t group_bytes,
                   std::int64_t g, std::int64_t r, Move&& move) {
  const std::size_t group_in_row = static_cast<std::size_t>(g) * group_bytes;
  std::size_t at = group_in_row * kInterleavedRows;
  for (const InterleaveSegment& s : segments) {
    const auto unit = static_cast<std::size_t>(s.unit);
    for (std::size_t i = 0; i < static_cast<std::size_t>(s.bytes) / unit; ++i) {
      move(at + (i * kInterleavedRows + static_cast<std::size_t>(r)) * unit,
           group_in_row + static_cast<std::size_t>(s.offset) + i * unit, unit);
    }
    at += static_cast<std::size_t>(s.bytes) * kInterleavedRows;
  }
}

std::size_t group_bytes(std::span<const InterleaveSegment> segments) {
  std::size_t bytes = 0;
  for (const InterleaveSegment& s : segments) bytes += static_cast<std::size_t>(s.bytes);
  return bytes;
}

}  // namespace

std::span<const InterleaveSegment> interleave_segments(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0: return kQ8_0;
    case DType::kQ4_0: return kQ4_0;
    case DType::kQ4_1: return kQ4_1;
    case DType::kQ5_0: return kQ5_0;
    case DType::kQ5_1: return kQ5_1;
    case DType::kQ4_K: return kQ4_K;
    case DType::kQ5_K: return kQ5_K;
    case DType::kQ6_K: return kQ6_K;
    default: return {};
  }
}

InterleavedMatrix interleave_rows(const TensorView& w) {
  const std::span<const InterleaveSegment> segments = interleave_segments(w.dtype);
  PAGODA_CHECK(!segments.empty() && !w.interleaved && w.input_permutation == nullptr)
      << "interleave_rows on " << dtype_name(w.dtype);
  const std::size_t group = group_bytes(segments);
  PAGODA_CHECK_EQ(w.row_stride % group, 0u) << dtype_name(w.dtype) << " rows of whole groups";
  const auto groups = static_cast<std::int64_t>(w.row_stride / group);
  const std::int64_t panels = (w.num_rows + kInterleavedRows - 1) / kInterleavedRows;
  const std::size_t panel_bytes = w.row_stride * kInterleavedRows;
  InterleavedMatrix out;
  out.bytes.assign(static_cast<std::size_t>(panels) * panel_bytes, 0);
  for (std::int64_t p = 0; p < panels; ++p) {
    std::uint8_t* panel = out.bytes.data() + static_cast<std::size_t>(p) * panel_bytes;
    const std::int64_t rows = std::min(kInterleavedRows, w.num_rows - p * kInterleavedRows);
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::uint8_t* row = w.row(p * kInterleavedRows + r);
      for (std::int64_t g = 0; g < groups; ++g) {
        for_each_unit(segments, group, g, r, [&](std::size_t to, std::size_t from, std::size_t n) {
          std::memcpy(panel + to, row + from, n);
        });
      }
    }
  }
  out.view = w;
  out.view.data = out.bytes.data();
  out.view.interleaved = true;
  return out;
}

void deinterleave_rows(const TensorView& w, std::int64_t row_begin, std::int64_t row_end,
                       std::uint8_t* out) {
  PAGODA_CHECK(w.interleaved && row_begin >= 0 && row_begin <= row_end && row_end <= w.num_rows)
      << "rows [" << row_begin << ", " << row_end << ") of " << w.num_rows;
  const std::span<const InterleaveSegment> segments = interleave_segments(w.dtype);
  const std::size_t group = group_bytes(segments);
  const auto groups = static_cast<std::int64_t>(w.row_stride / group);
  const std::size_t panel_bytes = w.row_stride * kInterleavedRows;
  for (std::int64_t n = row_begin; n < row_end; ++n) {
    const std::uint8_t* panel = static_cast<const std::uint8_t*>(w.data) +
                                static_cast<std::size_t>(n / kInterleavedRows) * panel_bytes;
    std::uint8_t* row = out + static_cast<std::size_t>(n - row_begin) * w.row_stride;
    for (std::int64_t g = 0; g < groups; ++g) {
      for_each_unit(segments, group, g, n % kInterleavedRows,
                    [&](std::size_t from, std::size_t to, std::size_t bytes) {
                      std::memcpy(row + to, panel + from, bytes);
                    });
    }
  }
}

const std::uint8_t* gguf_row(const TensorView& w, std::int64_t row,
                             std::vector<std::uint8_t>& scratch) {
  if (!w.interleaved) return w.row(row);
  scratch.resize(w.row_stride);
  deinterleave_rows(w, row, row + 1, scratch.data());
  return scratch.data();
}

}  // namespace pagoda::cpu
