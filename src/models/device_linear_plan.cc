#include "models/device_linear_plan.h"

#include <cstring>
#include <string>

#include "quant/f8_s_block.h"
#include "quant/q4_z_block.h"

namespace pagoda::models {

namespace {

bool is_32_block_type(DType t) {
  return t == DType::kQ4_Z || t == DType::kQ4_0 || t == DType::kF8_S;
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

// The parts can be stacked into one matrix of a 32-block type.
bool stackable(std::span<const cpu::TensorView> parts) {
  if (parts.empty() || !is_32_block_type(parts[0].dtype)) return false;
  for (const cpu::TensorView& p : parts) {
    if (p.dtype != parts[0].dtype || p.num_cols != parts[0].num_cols || p.num_cols % 32 != 0 ||
        p.num_rows <= 0 || !same_permutation(p, parts[0])) {
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

}  // namespace

std::string_view device_linear_kind_name(DeviceLinearKind kind) {
  switch (kind) {
    case DeviceLinearKind::kDense: return "dense";
    case DeviceLinearKind::kW4A16: return "w4a16";
    case DeviceLinearKind::kFp8: return "fp8";
  }
  return "dense";
}

DeviceLinearKind device_linear_kind(std::span<const cpu::TensorView> parts,
                                    bool activations_16bit) {
  if (!activations_16bit || !stackable(parts)) return DeviceLinearKind::kDense;
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
  if (!stackable(parts)) {
    return invalid_argument(
        "concatenate_rows: the parts differ in block type, columns or input permutation, or are "
        "not Q4_Z / Q4_0 / F8_S");
  }
  quant::QuantizedMatrix m;
  m.dtype = parts[0].dtype;
  m.cols = parts[0].num_cols;
  m.group_size = 32;
  for (const cpu::TensorView& p : parts) m.rows += p.num_rows;
  const std::size_t bytes_per_row = row_bytes(parts[0]);
  m.bytes.resize(static_cast<std::size_t>(m.rows) * bytes_per_row);
  std::uint8_t* out = m.bytes.data();
  for (const cpu::TensorView& p : parts) {
    for (std::int64_t r = 0; r < p.num_rows; ++r, out += bytes_per_row) {
      std::memcpy(out, p.row(r), bytes_per_row);
    }
  }
  if (parts[0].input_permutation != nullptr) {
    m.input_permutation.assign(parts[0].input_permutation,
                               parts[0].input_permutation + parts[0].num_cols);
  }
  if (m.dtype == DType::kQ4_Z) m.group_size = uniform_q4_z_group_size(m);
  return m;
}

StatusOr<quant::W4A16Matrix> w4a16_layout(std::span<const cpu::TensorView> parts) {
  PAGODA_ASSIGN_OR_RETURN(const quant::QuantizedMatrix stacked, concatenate_rows(parts));
  if (stacked.dtype == DType::kQ4_0) {
    return quant::repack_w4a16_q4_0(stacked.bytes.data(), stacked.rows, stacked.cols);
  }
  return quant::repack_w4a16(stacked);
}

StatusOr<quant::Fp8ChannelMatrix> fp8_layout(std::span<const cpu::TensorView> parts) {
  PAGODA_ASSIGN_OR_RETURN(const quant::QuantizedMatrix stacked, concatenate_rows(parts));
  return quant::split_fp8_per_channel(stacked);
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
