#include "quant/gguf_repack.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <string>
#include <vector>

#include "model/dequantize.h"
#include "quant/float_codes.h"

namespace pagoda::quant {

namespace {

// One group's fields, as the GGUF form stores them.
struct GroupFields {
  std::uint16_t s = 0;  // fp16 bits
  int sc = 1;
  std::uint16_t b = 0;  // fp16 bits
  int mc = 1;
  std::uint8_t q[32] = {};  // codes, group_size of them
};

// What a block type looks like in the GGUF form, and how to read one block's groups.
struct Form {
  int block_size;
  int block_bytes;
  int group_size;
  int hi_bits;  // code bits above the low nibble: 0, 1, 2 or 4
  bool has_min;
  int code_zero;
  int super_shift;  // log2(groups per block) for the K-quants, whose d and dmin the groups share
  void (*read)(const std::uint8_t* block, GroupFields* groups);
};

std::uint16_t u16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}

std::uint32_t u32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

constexpr std::uint16_t kFp16Sign = 0x8000;

// Nibble j of a 32-block's 16 bytes: j < 16 low nibbles, j >= 16 high.
int nibble32(const std::uint8_t* qs, int j) {
  return j < 16 ? qs[j] & 0x0F : qs[j - 16] >> 4;
}

// Q4_1: fp16 d | fp16 m | 16 bytes of nibbles; w = d * q + m.
void read_q4_1(const std::uint8_t* b, GroupFields* g) {
  g->s = u16(b);
  g->b = u16(b + 2);
  for (int j = 0; j < 32; ++j) g->q[j] = static_cast<std::uint8_t>(nibble32(b + 4, j));
}

// Q5_0: fp16 d | u32 qh (bit j: code j's fifth bit) | nibbles; w = d * (q - 16).
void read_q5_0(const std::uint8_t* b, GroupFields* g) {
  g->s = u16(b);
  const std::uint32_t qh = u32(b + 2);
  for (int j = 0; j < 32; ++j) {
    g->q[j] = static_cast<std::uint8_t>(nibble32(b + 6, j) | (((qh >> j) & 1u) << 4));
  }
}

// Q5_1: fp16 d | fp16 m | u32 qh | nibbles; w = d * q + m.
void read_q5_1(const std::uint8_t* b, GroupFields* g) {
  g->s = u16(b);
  g->b = u16(b + 2);
  const std::uint32_t qh = u32(b + 4);
  for (int j = 0; j < 32; ++j) {
    g->q[j] = static_cast<std::uint8_t>(nibble32(b + 8, j) | (((qh >> j) & 1u) << 4));
  }
}

// Q8_0: fp16 d | 32 int8; w = d * q, stored as q + 128 with code_zero 128.
void read_q8_0(const std::uint8_t* b, GroupFields* g) {
  g->s = u16(b);
  for (int j = 0; j < 32; ++j) {
    g->q[j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(b[2 + j]) + 128);
  }
}

// Q4_K / Q5_K's sub-block j (0..7) 6-bit scale and min, from the 12 packed bytes:
//   j < 4:  scale = s[j] & 63, min = s[j + 4] & 63
//   j >= 4: scale = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4, min = (s[j + 4] >> 4) | (s[j] >> 6) <<
//   4
void k_sub_scale(const std::uint8_t* s, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q4_K / Q5_K's shared head: fp16 d | fp16 dmin | 12 bytes of sub-block scales and mins;
// w = (d * sc) * q - (dmin * mc), stored as B = -dmin.
void read_k_head(const std::uint8_t* b, GroupFields* g) {
  for (int sub = 0; sub < 8; ++sub) {
    g[sub].s = u16(b);
    g[sub].b = static_cast<std::uint16_t>(u16(b + 2) ^ kFp16Sign);
    k_sub_scale(b + 4, sub, &g[sub].sc, &g[sub].mc);
  }
}

// Q4_K's 128 code bytes: bytes 32c .. 32c + 31 hold sub-blocks 2c (low nibbles), 2c + 1 (high).
int k_nibble(const std::uint8_t* qs, int sub, int j) {
  return (qs[32 * (sub / 2) + j] >> (4 * (sub % 2))) & 0x0F;
}

// Q4_K: head | qs[128].
void read_q4_k(const std::uint8_t* b, GroupFields* g) {
  read_k_head(b, g);
  for (int sub = 0; sub < 8; ++sub) {
    for (int j = 0; j < 32; ++j) g[sub].q[j] = static_cast<std::uint8_t>(k_nibble(b + 16, sub, j));
  }
}

// Q5_K: head | qh[32] (bit sub of byte j: code j of sub-block sub's fifth bit) | qs[128].
void read_q5_k(const std::uint8_t* b, GroupFields* g) {
  read_k_head(b, g);
  for (int sub = 0; sub < 8; ++sub) {
    for (int j = 0; j < 32; ++j) {
      g[sub].q[j] =
          static_cast<std::uint8_t>(k_nibble(b + 48, sub, j) | (((b[16 + j] >> sub) & 1) << 4));
    }
  }
}

// Q6_K: ql[128] | qh[64] | int8 scales[16] | fp16 d; w = (d * scale) * (q - 32), one scale per
// 16 weights. Weight e's half h = e / 128 (r = e % 128) takes its low nibble from
// ql[64h + r % 64] (high nibble when r >= 64) and its top 2 bits from
// qh[32h + r % 32] >> 2 (r / 32).
void read_q6_k(const std::uint8_t* b, GroupFields* g) {
  for (int e = 0; e < 256; ++e) {
    const int half = e / 128, r = e % 128;
    const int low = (b[64 * half + r % 64] >> (4 * (r / 64))) & 0x0F;
    const int high = (b[128 + 32 * half + r % 32] >> (2 * (r / 32))) & 3;
    g[e / 16].q[e % 16] = static_cast<std::uint8_t>(low | (high << 4));
  }
  for (int sub = 0; sub < 16; ++sub) {
    g[sub].s = u16(b + 208);
    g[sub].sc = static_cast<std::int8_t>(b[192 + sub]);
  }
}

// The 2-bit field of weight e (0..255) in a 64-byte K-quant array: each half (128 weights) uses
// 32 bytes; weights [32s, 32s + 32) of a half sit at bit 2s of its bytes.
int k_two_bits(const std::uint8_t* qs, int e) {
  return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

// Q2_K: scales[16] (low nibble scale, high nibble min, per 16 weights) | qs[64] | fp16 d |
// fp16 dmin; w = (d * scale) * q - (dmin * min).
void read_q2_k(const std::uint8_t* b, GroupFields* g) {
  for (int sub = 0; sub < 16; ++sub) {
    g[sub].s = u16(b + 80);
    g[sub].b = static_cast<std::uint16_t>(u16(b + 82) ^ kFp16Sign);
    g[sub].sc = b[sub] & 0x0F;
    g[sub].mc = b[sub] >> 4;
    for (int j = 0; j < 16; ++j) {
      g[sub].q[j] = static_cast<std::uint8_t>(k_two_bits(b + 16, 16 * sub + j));
    }
  }
}

// Q3_K: hmask[32] | qs[64] | 12 bytes of sixteen 6-bit scales | fp16 d; w = (d * scale) *
// (q2 + 4 h - 4), h bit e / 32 of hmask[e % 32]: the 3-bit code q2 + 4 h with code_zero 4. Scale
// i: low 4 bits from byte i (i < 8) or the high nibble of byte i - 8, high 2 bits at bit
// 2 (i / 4) of byte 8 + i % 4, stored plus 32.
void read_q3_k(const std::uint8_t* b, GroupFields* g) {
  const std::uint8_t* scales = b + 96;
  for (int sub = 0; sub < 16; ++sub) {
    const int low = sub < 8 ? (scales[sub] & 0x0F) : (scales[sub - 8] >> 4);
    const int high = (scales[8 + sub % 4] >> (2 * (sub / 4))) & 3;
    g[sub].s = u16(b + 108);
    g[sub].sc = (low | (high << 4)) - 32;
    for (int j = 0; j < 16; ++j) {
      const int e = 16 * sub + j;
      const int h = (b[e % 32] >> (e / 32)) & 1;
      g[sub].q[j] = static_cast<std::uint8_t>(k_two_bits(b + 32, e) + 4 * h);
    }
  }
}

const Form* form_of(DType dtype) {
  static const Form kQ4_1{32, 20, 32, 0, true, 0, 0, read_q4_1};
  static const Form kQ5_0{32, 22, 32, 1, false, 16, 0, read_q5_0};
  static const Form kQ5_1{32, 24, 32, 1, true, 0, 0, read_q5_1};
  static const Form kQ8_0{32, 34, 32, 4, false, 128, 0, read_q8_0};
  static const Form kQ4_K{256, 144, 32, 0, true, 0, 3, read_q4_k};
  static const Form kQ5_K{256, 176, 32, 1, true, 0, 3, read_q5_k};
  static const Form kQ6_K{256, 210, 16, 2, false, 32, 4, read_q6_k};
  static const Form kQ2_K{256, 84, 16, 0, true, 0, 4, read_q2_k};
  static const Form kQ3_K{256, 110, 16, 0, false, 4, 4, read_q3_k};
  switch (dtype) {
    case DType::kQ4_1: return &kQ4_1;
    case DType::kQ5_0: return &kQ5_0;
    case DType::kQ5_1: return &kQ5_1;
    case DType::kQ8_0: return &kQ8_0;
    case DType::kQ4_K: return &kQ4_K;
    case DType::kQ5_K: return &kQ5_K;
    case DType::kQ6_K: return &kQ6_K;
    case DType::kQ2_K: return &kQ2_K;
    case DType::kQ3_K: return &kQ3_K;
    default: return nullptr;
  }
}

// The form a stack of parts of these types takes: its type's own for one type; for mixed types
// the widest codes, the finest group and super-group, a min term for all, and code_zero 0, each
// part's zero folded into its min (see the header).
struct Target {
  bool mixed = false;
  int group_size = 32;
  int super_shift = 0;
  int hi_bits = 0;
  bool has_min = false;
  int code_zero = 0;
};

Target target_of(std::span<const DType> types) {
  const Form& first = *form_of(types[0]);
  Target t;
  int super_cols = first.group_size << first.super_shift;
  t.group_size = first.group_size;
  for (const DType d : types) {
    const Form& f = *form_of(d);
    t.mixed = t.mixed || d != types[0];
    t.group_size = std::min(t.group_size, f.group_size);
    super_cols = std::min(super_cols, f.group_size << f.super_shift);
  }
  t.super_shift = std::countr_zero(static_cast<unsigned>(super_cols / t.group_size));
  for (const DType d : types) t.hi_bits = std::max(t.hi_bits, form_of(d)->hi_bits);
  t.has_min = t.mixed || first.has_min;
  t.code_zero = t.mixed ? 0 : first.code_zero;
  return t;
}

}  // namespace

bool gguf_repack_supported(DType dtype) {
  return form_of(dtype) != nullptr;
}

int gguf_repack_hi_bits(DType dtype) {
  const Form* f = form_of(dtype);
  return f != nullptr ? f->hi_bits : 0;
}

std::size_t gguf_device_bytes(std::span<const DType> types, std::int64_t rows, std::int64_t cols) {
  if (types.empty()) return 0;
  for (const DType d : types) {
    if (form_of(d) == nullptr) return 0;
  }
  const Target t = target_of(types);
  W4A16Matrix shape;  // no arrays: only its size arithmetic
  shape.rows = rows;
  shape.cols = cols;
  shape.group_size = t.group_size;
  shape.super_shift = t.super_shift;
  const auto words =
      static_cast<std::size_t>(shape.row_tiles() * shape.k_tiles() * kW4A16TileWords);
  const auto per_group = static_cast<std::size_t>(shape.groups() * shape.padded_rows());
  const auto per_super = static_cast<std::size_t>(shape.scale_groups() * shape.padded_rows());
  const std::size_t with_min = t.has_min ? 1 : 0;
  return words * sizeof(std::uint32_t) * (4 + t.hi_bits) / 4 +
         per_super * sizeof(std::uint16_t) * (1 + with_min) + per_group * (1 + with_min);
}

StatusOr<W4A16Matrix> repack_gguf(DType dtype, const std::uint8_t* blocks, std::int64_t rows,
                                  std::int64_t cols) {
  const DTypeInfo& info = dtype_info(dtype);
  const GgufPart part{
      .dtype = dtype,
      .blocks = blocks,
      .rows = rows,
      .row_stride = static_cast<std::size_t>(cols / std::max<std::int64_t>(info.block_size, 1)) *
                    static_cast<std::size_t>(info.block_bytes)};
  return repack_gguf_parts(std::span(&part, 1), cols);
}

StatusOr<W4A16Matrix> repack_gguf_parts(std::span<const GgufPart> parts, std::int64_t cols) {
  if (parts.empty()) return invalid_argument("GGUF repack: no parts");
  std::int64_t rows = 0;
  for (const GgufPart& p : parts) {
    const Form* f = form_of(p.dtype);
    if (f == nullptr) {
      return invalid_argument("GGUF repack: " + std::string(dtype_name(p.dtype)) +
                              " has no GPU form");
    }
    if (p.rows <= 0 || cols <= 0 || cols % f->block_size != 0) {
      return invalid_argument("GGUF repack: " + std::string(dtype_name(p.dtype)) + " rows of " +
                              std::to_string(cols) + " columns are not whole " +
                              std::to_string(f->block_size) + "-blocks");
    }
    rows += p.rows;
  }
  std::vector<DType> types;
  for (const GgufPart& p : parts) types.push_back(p.dtype);
  const Target t = target_of(types);
  const bool mixed = t.mixed, has_min = t.has_min;
  const int group_size = t.group_size;
  W4A16Matrix m = w4a16_empty(rows, cols, group_size, true, t.hi_bits);
  m.super_shift = t.super_shift;
  m.code_zero = t.code_zero;
  const auto per_group = static_cast<std::size_t>(m.groups() * m.padded_rows());
  m.scales.assign(static_cast<std::size_t>(m.scale_groups() * m.padded_rows()), 0);
  if (has_min) {
    m.mins.assign(m.scales.size(), 0);
    m.min_codes.assign(per_group, 0);
  }
  // Each row's source; rows are read into bands of 16 that are packed into tiles, in parallel.
  struct RowSource {
    const GgufPart* part;
    std::int64_t row;
  };
  std::vector<RowSource> sources;
  sources.reserve(static_cast<std::size_t>(rows));
  for (const GgufPart& p : parts) {
    for (std::int64_t r = 0; r < p.rows; ++r) sources.push_back({&p, r});
  }
  std::atomic<const GgufPart*> overflow{nullptr};
  const auto read_row = [&](std::int64_t n, std::uint8_t* codes) {
    const GgufPart& p = *sources[static_cast<std::size_t>(n)].part;
    const Form& f = *form_of(p.dtype);
    const int groups_per_block = f.block_size / f.group_size;
    const std::int64_t blocks_per_row = cols / f.block_size;
    const std::uint8_t* row =
        p.blocks +
        static_cast<std::size_t>(sources[static_cast<std::size_t>(n)].row) * p.row_stride;
    GroupFields groups[16];
    for (std::int64_t blk = 0; blk < blocks_per_row; ++blk) {
      // Fresh fields: a type's reader sets only what it stores (sc, mc default to 1, B to 0).
      std::fill(std::begin(groups), std::end(groups), GroupFields{});
      f.read(row + blk * f.block_bytes, groups);
      for (int i = 0; i < groups_per_block; ++i) {
        GroupFields& g = groups[i];
        if (mixed && f.code_zero != 0) {
          // s (q - z) = s q + (-z d) sc: -z d is d scaled by a power of two, exact in fp16
          // unless it overflows.
          const float b = -static_cast<float>(f.code_zero) * fp16_to_float(g.s);
          g.b = float_to_fp16(b);
          g.mc = g.sc;
          if (fp16_to_float(g.b) != b) overflow.store(&p);
        } else if (mixed && !f.has_min) {
          g.b = 0;
          g.mc = 0;
        }
        const std::int64_t col0 = (blk * groups_per_block + i) * f.group_size;
        for (std::int64_t c = col0; c < col0 + f.group_size; c += group_size) {
          const std::int64_t group = c / group_size;
          const auto at = static_cast<std::size_t>(group * m.padded_rows() + n);
          const auto super_at =
              static_cast<std::size_t>((group >> m.super_shift) * m.padded_rows() + n);
          m.scales[super_at] = g.s;
          m.scale_codes[at] = static_cast<std::int8_t>(g.sc);
          if (has_min) {
            m.mins[super_at] = g.b;
            m.min_codes[at] = static_cast<std::int8_t>(g.mc);
          }
        }
        std::copy(g.q, g.q + f.group_size, codes + col0);
      }
    }
  };
  w4a16_fill_bands(m, read_row);
  if (const GgufPart* p = overflow.load()) {
    return invalid_argument("GGUF repack: a " + std::string(dtype_name(p->dtype)) +
                            " scale times its zero point overflows fp16");
  }
  return m;
}

}  // namespace pagoda::quant
