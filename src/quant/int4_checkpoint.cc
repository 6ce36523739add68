#include "quant/int4_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <vector>

#include "model/dequantize.h"
#include "quant/float_codes.h"
#include "quant/load_threads.h"
#include "quant/q4_z_block.h"

namespace pagoda::quant {

namespace {

constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

std::string shape_string(const std::vector<std::uint64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    out += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  }
  return out + "]";
}

Status check_tensor(const std::string& name, const char* suffix, const ModelTensor* t,
                    std::initializer_list<DType> dtypes, std::vector<std::uint64_t> shape) {
  const std::string full = name + "." + suffix;
  if (t == nullptr) return invalid_argument(full + " is missing");
  if (std::find(dtypes.begin(), dtypes.end(), t->dtype) == dtypes.end()) {
    return invalid_argument(full + " has type " + std::string(dtype_name(t->dtype)) +
                            ", expected " + std::string(dtype_name(*dtypes.begin())));
  }
  if (t->shape != shape) {
    return invalid_argument(full + " has shape " + shape_string(t->shape) + ", expected " +
                            shape_string(shape));
  }
  return {};
}

std::uint32_t word(const ModelTensor& t, std::uint64_t index) {
  std::uint32_t w;
  std::memcpy(&w, t.data.data() + index * 4, sizeof(w));
  return w;
}

// Scales as fp16 bits: F16 as stored; BF16 and F32 only when fp16 holds them exactly, so the
// Q4_Z block never rounds a weight the checkpoint defines.
StatusOr<std::vector<std::uint16_t>> scales_fp16(const std::string& name, const ModelTensor& t) {
  std::vector<float> values(t.num_elements());
  PAGODA_RETURN_IF_ERROR(dequantize(t.dtype, t.data, values));
  std::vector<std::uint16_t> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::optional<std::uint16_t> bits = exact_fp16(values[i]);
    if (!bits) {
      return unimplemented(name + ".scales[" + std::to_string(i) +
                           "] = " + std::to_string(values[i]) +
                           " is not exactly representable in fp16; only fp16 scales are supported");
    }
    out[i] = *bits;
  }
  return out;
}

// Number of scale groups and each input channel's group.
StatusOr<std::vector<std::int32_t>> input_groups(const std::string& name, const ModelTensor* g_idx,
                                                 std::int64_t group_size, std::int64_t num_groups,
                                                 std::int64_t cols) {
  std::vector<std::int32_t> groups(static_cast<std::size_t>(cols));
  if (g_idx == nullptr) {
    for (std::int64_t k = 0; k < cols; ++k) groups[k] = static_cast<std::int32_t>(k / group_size);
    return groups;
  }
  PAGODA_RETURN_IF_ERROR(
      check_tensor(name, "g_idx", g_idx, {DType::kI32}, {static_cast<std::uint64_t>(cols)}));
  for (std::int64_t k = 0; k < cols; ++k) {
    const auto g = static_cast<std::int32_t>(word(*g_idx, static_cast<std::uint64_t>(k)));
    if (g < 0 || g >= num_groups) {
      return invalid_argument(name + ".g_idx[" + std::to_string(k) + "] = " + std::to_string(g) +
                              " is outside the " + std::to_string(num_groups) + " groups");
    }
    groups[k] = g;
  }
  return groups;
}

// Writes row n's quants, one byte each, into q_row [cols]; called from several threads at once.
using UnpackRow = std::function<void(std::int64_t n, std::uint8_t* q_row)>;

// The shared second half of both repackers: each row's quants (unpack_row), zeros and scales
// [num_groups, rows], each input channel's group -> Q4_Z rows, made on the load threads.
StatusOr<QuantizedMatrix> build_q4_z(const std::string& name, const UnpackRow& unpack_row,
                                     const std::vector<std::uint8_t>& zeros,
                                     const std::vector<std::uint16_t>& scales,
                                     const std::vector<std::int32_t>& groups,
                                     std::int64_t group_size, std::int64_t rows,
                                     std::int64_t cols) {
  QuantizedMatrix m;
  m.dtype = DType::kQ4_Z;
  m.rows = rows;
  m.cols = cols;
  m.group_size = group_size;
  std::vector<std::int32_t> order(static_cast<std::size_t>(cols));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int32_t a, std::int32_t b) { return groups[a] < groups[b]; });
  const std::int64_t num_blocks = cols / 32;
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    if (groups[order[b * 32]] != groups[order[b * 32 + 31]]) {
      return unimplemented(name +
                           ": input channels sorted by group do not fall into whole "
                           "32-channel blocks (a group's size is not a multiple of 32)");
    }
  }
  bool identity = true;
  for (std::int64_t k = 0; k < cols; ++k) identity = identity && order[k] == k;
  if (!identity) m.input_permutation = order;
  m.bytes.resize(static_cast<std::size_t>(rows) * m.row_bytes());
  constexpr std::int64_t kRowsPerRange = 64;
  parallel_ranges(rows, kRowsPerRange, [&](std::int64_t begin, std::int64_t end) {
    std::vector<std::uint8_t> q_row(static_cast<std::size_t>(cols));
    std::uint8_t block_q[32];
    for (std::int64_t n = begin; n < end; ++n) {
      unpack_row(n, q_row.data());
      std::uint8_t* dst = m.bytes.data() + static_cast<std::size_t>(n) * m.row_bytes();
      for (std::int64_t b = 0; b < num_blocks; ++b) {
        for (int j = 0; j < 32; ++j) block_q[j] = q_row[order[b * 32 + j]];
        const std::size_t g = static_cast<std::size_t>(groups[order[b * 32]]);
        const std::size_t at = g * static_cast<std::size_t>(rows) + static_cast<std::size_t>(n);
        write_q4_z_block(scales[at], zeros[at], block_q, dst + b * kQ4ZBlockBytes);
      }
    }
  });
  return m;
}

// What GPTQ and AWQ share: the shape rule, the group size (-1: one group per row), and the
// qzeros [groups, rows / 8] and scales [groups, rows] tensors every packing stores.
struct Int4Groups {
  std::int64_t group_size = 0;
  std::int64_t num_groups = 0;
};

StatusOr<Int4Groups> check_groups(const std::string& name, const Int4CheckpointTensors& t,
                                  const QuantizationConfig& config, std::int64_t rows,
                                  std::int64_t cols) {
  if (rows % 8 != 0 || cols % 32 != 0) {
    return unimplemented(name +
                         ": 4-bit layers need out_features % 8 == 0 and in_features % 32 "
                         "== 0; this one is [" +
                         std::to_string(rows) + ", " + std::to_string(cols) + "]");
  }
  Int4Groups out;
  out.group_size = config.group_size == -1 ? cols : config.group_size;
  out.num_groups = (cols + out.group_size - 1) / out.group_size;
  const auto n = static_cast<std::uint64_t>(rows);
  const auto g = static_cast<std::uint64_t>(out.num_groups);
  PAGODA_RETURN_IF_ERROR(check_tensor(name, "qzeros", t.qzeros, {DType::kI32}, {g, n / 8}));
  PAGODA_RETURN_IF_ERROR(
      check_tensor(name, "scales", t.scales, {DType::kF16, DType::kBF16, DType::kF32}, {g, n}));
  return out;
}

}  // namespace

StatusOr<QuantizedMatrix> repack_gptq(const std::string& name, const Int4CheckpointTensors& t,
                                      const QuantizationConfig& config, std::int64_t rows,
                                      std::int64_t cols) {
  PAGODA_ASSIGN_OR_RETURN(const Int4Groups layout, check_groups(name, t, config, rows, cols));
  const auto [group_size, num_groups] = layout;
  PAGODA_RETURN_IF_ERROR(
      check_tensor(name, "qweight", t.qweight, {DType::kI32},
                   {static_cast<std::uint64_t>(cols / 8), static_cast<std::uint64_t>(rows)}));
  if (config.desc_act && t.g_idx == nullptr) {
    return invalid_argument(name + ".g_idx is missing but quantization_config.desc_act is true");
  }
  PAGODA_ASSIGN_OR_RETURN(std::vector<std::int32_t> groups,
                          input_groups(name, t.g_idx, group_size, num_groups, cols));
  PAGODA_ASSIGN_OR_RETURN(std::vector<std::uint16_t> scales, scales_fp16(name, *t.scales));
  // qweight [cols / 8, rows]: row c's quants are column c, 8 input channels per word.
  const UnpackRow unpack_row = [&](std::int64_t c, std::uint8_t* q_row) {
    for (std::int64_t i = 0; i < cols / 8; ++i) {
      const std::uint32_t w = word(*t.qweight, static_cast<std::uint64_t>(i * rows + c));
      for (int j = 0; j < 8; ++j) q_row[i * 8 + j] = (w >> (4 * j)) & 0x0F;
    }
  };
  const std::uint8_t offset = config.zeros_stored_minus_one ? 1 : 0;
  std::vector<std::uint8_t> zeros(static_cast<std::size_t>(num_groups * rows));
  for (std::int64_t gi = 0; gi < num_groups; ++gi) {
    for (std::int64_t c = 0; c < rows / 8; ++c) {
      const std::uint32_t w = word(*t.qzeros, static_cast<std::uint64_t>(gi * (rows / 8) + c));
      for (int j = 0; j < 8; ++j) {
        zeros[gi * rows + c * 8 + j] = static_cast<std::uint8_t>(((w >> (4 * j)) & 0x0F) + offset);
      }
    }
  }
  return build_q4_z(name, unpack_row, zeros, scales, groups, group_size, rows, cols);
}

StatusOr<QuantizedMatrix> repack_awq(const std::string& name, const Int4CheckpointTensors& t,
                                     const QuantizationConfig& config, std::int64_t rows,
                                     std::int64_t cols) {
  PAGODA_ASSIGN_OR_RETURN(const Int4Groups layout, check_groups(name, t, config, rows, cols));
  const auto [group_size, num_groups] = layout;
  PAGODA_RETURN_IF_ERROR(
      check_tensor(name, "qweight", t.qweight, {DType::kI32},
                   {static_cast<std::uint64_t>(cols), static_cast<std::uint64_t>(rows / 8)}));
  PAGODA_ASSIGN_OR_RETURN(std::vector<std::int32_t> groups,
                          input_groups(name, nullptr, group_size, num_groups, cols));
  PAGODA_ASSIGN_OR_RETURN(std::vector<std::uint16_t> scales, scales_fp16(name, *t.scales));
  // qweight [cols, rows / 8]: row r's quant for input channel k is nibble i of word
  // (k, r / 8), where kAwqOrder[i] = r % 8.
  int nibble_of[8];
  for (int i = 0; i < 8; ++i) nibble_of[kAwqOrder[i]] = i;
  const UnpackRow unpack_row = [&](std::int64_t r, std::uint8_t* q_row) {
    const int shift = 4 * nibble_of[r % 8];
    for (std::int64_t k = 0; k < cols; ++k) {
      const std::uint32_t w = word(*t.qweight, static_cast<std::uint64_t>(k * (rows / 8) + r / 8));
      q_row[k] = (w >> shift) & 0x0F;
    }
  };
  std::vector<std::uint8_t> zeros(static_cast<std::size_t>(num_groups * rows));
  for (std::int64_t gi = 0; gi < num_groups; ++gi) {
    for (std::int64_t c = 0; c < rows / 8; ++c) {
      const std::uint32_t w = word(*t.qzeros, static_cast<std::uint64_t>(gi * (rows / 8) + c));
      for (int i = 0; i < 8; ++i) {
        zeros[gi * rows + c * 8 + kAwqOrder[i]] = static_cast<std::uint8_t>((w >> (4 * i)) & 0x0F);
      }
    }
  }
  return build_q4_z(name, unpack_row, zeros, scales, groups, group_size, rows, cols);
}

}  // namespace pagoda::quant
