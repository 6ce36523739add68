#include "models/device_linear_plan.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/check.h"
#include "quant/f8_s_block.h"
#include "quant/gguf_repack.h"
#include "quant/load_threads.h"
#include "quant/q4_z_block.h"

namespace pagoda::models {

namespace {

// A block type that stacks into one quantized matrix with a GPU form.
bool is_stackable_type(DType t) {
  return t == DType::kQ4_Z || t == DType::kQ4_0 || t == DType::kF8_S ||
         quant::gguf_repack_supported(t);
}

std::size_t row_bytes(const cpu::TensorView& v) {
  const DTypeInfo& info = dtype_info(v.dtype);
  return static_cast<std::size_t>(v.num_cols / info.block_size) *
         static_cast<std::size_t>(info.block_bytes);
}

bool same_permutation(const cpu::TensorView& a, const cpu::TensorView& b) {
  if (a.input_permutation == b.input_permutation) return true;
  if (a.input_permutation == nullptr || b.input_permutation == nullptr) return false;
  return std::memcmp(a.input_permutation, b.input_permutation,
                     static_cast<std::size_t>(a.num_cols) * sizeof(std::int32_t)) == 0;
}

// The parts can be stacked into one matrix of a type with a GPU form (whole blocks of 32 or 256).
bool stackable(std::span<const cpu::TensorView> parts) {
  if (parts.empty() || !is_stackable_type(parts[0].dtype)) return false;
  const std::int64_t block = dtype_info(parts[0].dtype).block_size;
  for (const cpu::TensorView& p : parts) {
    if (p.dtype != parts[0].dtype || p.num_cols != parts[0].num_cols || p.num_cols % 32 != 0 ||
        p.num_cols % block != 0 || p.num_rows <= 0 || !same_permutation(p, parts[0])) {
      return false;
    }
  }
  return true;
}

// Every 32-block of each row carries the row's first scale: an F8_S matrix with per-row scales
// (per-tensor or per-channel checkpoints, --quantization fp8), not a block-scaled one.
bool f8_s_scales_per_row(const cpu::TensorView& v) {
  const std::int64_t blocks = v.num_cols / 32;
  for (std::int64_t r = 0; r < v.num_rows; ++r) {
    const std::uint8_t* row = v.row(r);
    for (std::int64_t b = 1; b < blocks; ++b) {
      if (std::memcmp(row + b * quant::kF8SBlockBytes, row, sizeof(float)) != 0) return false;
    }
  }
  return true;
}

// Parts of GGUF types with a GPU form (quant/gguf_repack.h), not necessarily one type: they stack
// into one matrix of the GGUF form (the general one when their types differ).
bool gguf_stackable(std::span<const cpu::TensorView> parts) {
  if (parts.empty()) return false;
  for (const cpu::TensorView& p : parts) {
    if (!quant::gguf_repack_supported(p.dtype) || p.input_permutation != nullptr ||
        p.num_cols != parts[0].num_cols || p.num_cols % dtype_info(p.dtype).block_size != 0 ||
        p.num_rows <= 0) {
      return false;
    }
  }
  return true;
}

// Every form here is built from the file's rows: interleaved views (interleaved_rows.h) are the
// CPU executor's own, made after its load, and never reach a GPU upload.
void check_row_major(std::span<const cpu::TensorView> parts) {
  for (const cpu::TensorView& p : parts) {
    PAGODA_CHECK(!p.interleaved) << "an interleaved CPU weight handed to the GPU upload";
  }
}

bool one_type(std::span<const cpu::TensorView> parts) {
  for (const cpu::TensorView& p : parts) {
    if (p.dtype != parts[0].dtype) return false;
  }
  return true;
}

// Rows per work item when a layer's rows are copied on the load threads.
constexpr std::int64_t kRowsPerCopy = 64;

// The row each part starts at in the stack, and the stack's height last.
std::vector<std::int64_t> first_rows(std::span<const cpu::TensorView> parts) {
  std::vector<std::int64_t> first = {0};
  for (const cpu::TensorView& p : parts) first.push_back(first.back() + p.num_rows);
  return first;
}

// Row n of the parts stacked (first: first_rows(parts)).
const std::uint8_t* stacked_row(std::span<const cpu::TensorView> parts,
                                const std::vector<std::int64_t>& first, std::int64_t n) {
  const auto p =
      static_cast<std::size_t>(std::upper_bound(first.begin(), first.end(), n) - first.begin() - 1);
  return parts[p].row(n - first[p]);
}

}  // namespace

std::string_view device_linear_kind_name(DeviceLinearKind kind) {
  switch (kind) {
    case DeviceLinearKind::kDense: return "dense";
    case DeviceLinearKind::kW4A16: return "w4a16";
    case DeviceLinearKind::kFp8: return "fp8";
    case DeviceLinearKind::kW8A16: return "w8a16";
  }
  return "dense";
}

DeviceLinearKind device_linear_kind(std::span<const cpu::TensorView> parts,
                                    bool activations_16bit) {
  check_row_major(parts);
  if (!activations_16bit) return DeviceLinearKind::kDense;
  if (gguf_stackable(parts)) {
    // GGUF files carry no act-order permutation; mixed types take the 8-bit general form.
    return one_type(parts) && quant::gguf_repack_hi_bits(parts[0].dtype) == 0
               ? DeviceLinearKind::kW4A16
               : DeviceLinearKind::kW8A16;
  }
  if (!stackable(parts)) return DeviceLinearKind::kDense;
  switch (parts[0].dtype) {
    case DType::kQ4_Z:
    case DType::kQ4_0: return DeviceLinearKind::kW4A16;
    case DType::kF8_S:
      // FP8 checkpoints carry no act-order permutation, and the FP8 layer takes none.
      if (parts[0].input_permutation != nullptr) return DeviceLinearKind::kDense;
      for (const cpu::TensorView& p : parts) {
        if (!f8_s_scales_per_row(p)) return DeviceLinearKind::kDense;
      }
      return DeviceLinearKind::kFp8;
    default: return DeviceLinearKind::kDense;
  }
}

StatusOr<quant::QuantizedMatrix> concatenate_rows(std::span<const cpu::TensorView> parts) {
  check_row_major(parts);
  if (!stackable(parts)) {
    return invalid_argument(
        "concatenate_rows: the parts differ in block type, columns or input permutation, or are "
        "not Q4_Z / Q4_0 / F8_S / a GGUF type with a GPU form");
  }
  quant::QuantizedMatrix m;
  m.dtype = parts[0].dtype;
  m.cols = parts[0].num_cols;
  m.group_size = 32;
  for (const cpu::TensorView& p : parts) m.rows += p.num_rows;
  const std::size_t bytes_per_row = row_bytes(parts[0]);
  m.bytes.resize(static_cast<std::size_t>(m.rows) * bytes_per_row);
  const std::vector<std::int64_t> first = first_rows(parts);
  quant::parallel_ranges(m.rows, kRowsPerCopy, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t n = begin; n < end; ++n) {
      std::memcpy(m.bytes.data() + static_cast<std::size_t>(n) * bytes_per_row,
                  stacked_row(parts, first, n), bytes_per_row);
    }
  });
  if (parts[0].input_permutation != nullptr) {
    m.input_permutation.assign(parts[0].input_permutation,
                               parts[0].input_permutation + parts[0].num_cols);
  }
  if (m.dtype == DType::kQ4_Z) m.group_size = uniform_q4_z_group_size(m);
  return m;
}

StatusOr<quant::W4A16Matrix> w4a16_layout(std::span<const cpu::TensorView> parts) {
  check_row_major(parts);
  if (gguf_stackable(parts)) {
    std::vector<quant::GgufPart> gguf;
    for (const cpu::TensorView& p : parts) {
      gguf.push_back({.dtype = p.dtype,
                      .blocks = static_cast<const std::uint8_t*>(p.data),
                      .rows = p.num_rows,
                      .row_stride = static_cast<std::size_t>(p.row_stride)});
    }
    return quant::repack_gguf_parts(gguf, parts[0].num_cols);
  }
  PAGODA_ASSIGN_OR_RETURN(const quant::QuantizedMatrix stacked, concatenate_rows(parts));
  if (stacked.dtype == DType::kQ4_0) {
    return quant::repack_w4a16_q4_0(stacked.bytes.data(), stacked.rows, stacked.cols);
  }
  return quant::repack_w4a16(stacked);
}

StatusOr<std::size_t> planned_device_bytes(std::span<const cpu::TensorView> parts,
                                           bool activations_16bit, std::size_t dense_bytes) {
  std::int64_t rows = 0;
  for (const cpu::TensorView& p : parts) rows += p.num_rows;
  const std::int64_t cols = parts.empty() ? 0 : parts[0].num_cols;
  switch (device_linear_kind(parts, activations_16bit)) {
    case DeviceLinearKind::kDense: return static_cast<std::size_t>(rows * cols) * dense_bytes;
    case DeviceLinearKind::kFp8: {
      PAGODA_ASSIGN_OR_RETURN(const quant::Fp8ChannelMatrix m, fp8_layout(parts));
      return m.codes.size() + m.scales.size() * sizeof(float);
    }
    case DeviceLinearKind::kW4A16:
    case DeviceLinearKind::kW8A16:
      if (gguf_stackable(parts)) {
        std::vector<DType> types;
        for (const cpu::TensorView& p : parts) types.push_back(p.dtype);
        return quant::gguf_device_bytes(types, rows, cols);
      }
      PAGODA_ASSIGN_OR_RETURN(const quant::W4A16Matrix m, w4a16_layout(parts));
      return m.device_bytes();
  }
  return static_cast<std::size_t>(rows * cols) * dense_bytes;
}

DeviceLinearKind device_table_kind(const cpu::TensorView& table, bool activations_16bit) {
  const DeviceLinearKind kind = device_linear_kind(std::span(&table, 1), activations_16bit);
  const bool w4a16_form = kind == DeviceLinearKind::kW4A16 || kind == DeviceLinearKind::kW8A16;
  return w4a16_form && table.input_permutation == nullptr ? kind : DeviceLinearKind::kDense;
}

StatusOr<std::size_t> planned_table_bytes(const cpu::TensorView& table, bool activations_16bit,
                                          std::size_t dense_bytes) {
  if (device_table_kind(table, activations_16bit) == DeviceLinearKind::kDense) {
    return static_cast<std::size_t>(table.num_rows * table.num_cols) * dense_bytes;
  }
  return planned_device_bytes(std::span(&table, 1), activations_16bit, dense_bytes);
}

StatusOr<quant::Fp8ChannelMatrix> fp8_layout(std::span<const cpu::TensorView> parts) {
  check_row_major(parts);
  if (!stackable(parts) || parts[0].dtype != DType::kF8_S) {
    return invalid_argument("fp8_layout: the parts are not F8_S of one width and permutation");
  }
  // Split straight from the parts: stacking them first would copy the layer once more.
  const std::vector<std::int64_t> first = first_rows(parts);
  PAGODA_ASSIGN_OR_RETURN(
      quant::Fp8ChannelMatrix m,
      quant::split_fp8_per_channel(first.back(), parts[0].num_cols,
                                   [&](std::int64_t n) { return stacked_row(parts, first, n); }));
  if (parts[0].input_permutation != nullptr) {
    m.input_permutation.assign(parts[0].input_permutation,
                               parts[0].input_permutation + parts[0].num_cols);
  }
  return m;
}

std::int64_t uniform_q4_z_group_size(const quant::QuantizedMatrix& m) {
  const std::int64_t blocks_per_row = m.cols / 32;
  for (std::int64_t blocks_per_group = blocks_per_row; blocks_per_group > 1; --blocks_per_group) {
    if (blocks_per_row % blocks_per_group != 0) continue;
    bool uniform = true;
    for (std::int64_t n = 0; n < m.rows && uniform; ++n) {
      const std::uint8_t* row = m.bytes.data() + static_cast<std::size_t>(n) * m.row_bytes();
      for (std::int64_t b = 0; b < blocks_per_row; ++b) {
        const std::uint8_t* first = row + (b - b % blocks_per_group) * quant::kQ4ZBlockBytes;
        // d (2 bytes) and z (1 byte) head each block.
        if (std::memcmp(row + b * quant::kQ4ZBlockBytes, first, 3) != 0) {
          uniform = false;
          break;
        }
      }
    }
    if (uniform) return blocks_per_group * 32;
  }
  return 32;
}

}  // namespace pagoda::models
