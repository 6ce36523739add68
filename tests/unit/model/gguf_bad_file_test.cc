// Broken GGUF files: each must give a clear error naming the file and the problem, never a crash
// (run under the Asan build type too).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "gguf_bytes.h"
#include "model/gguf_file.h"

namespace pagoda {
namespace {

using testing::GgufBytes;

constexpr std::uint32_t kQ8_0 = 8;
constexpr std::uint32_t kF32 = 0;

StatusOr<std::unique_ptr<GgufFile>> parse(const GgufBytes& b) {
  return GgufFile::parse("bad.gguf", b.bytes, nullptr);
}

// Parsing fails with a data_loss-or-worse error that names the file and contains `problem`.
void expect_error(const GgufBytes& b, const std::string& problem) {
  auto file = parse(b);
  ASSERT_FALSE(file.ok()) << "expected an error about: " << problem;
  EXPECT_NE(file.status().message().find("bad.gguf: "), std::string::npos)
      << file.status().message();
  EXPECT_NE(file.status().message().find(problem), std::string::npos) << file.status().message();
}

// A valid file: two metadata entries and one Q8_0 tensor of 2 rows x 32.
GgufBytes valid_file() {
  GgufBytes b;
  b.header(3, 1, 2).kv_string("general.architecture", "llama").kv_u32("general.alignment", 32);
  b.tensor("w", {32, 2}, kQ8_0, 0).pad_to(32).zeros(68);
  return b;
}

TEST(GgufBadFileTest, ValidBaselineParses) {
  auto file = parse(valid_file());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ((*file)->tensors()[0].num_bytes, 68u);
}

TEST(GgufBadFileTest, EmptyFile) {
  const auto path = std::filesystem::temp_directory_path() / "pagoda_empty_test.gguf";
  std::ofstream(path).close();
  auto file = GgufFile::open(path.string());
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().message(), path.string() + ": file is empty; expected a GGUF model file");
  std::filesystem::remove(path);
}

TEST(GgufBadFileTest, WrongMagic) {
  GgufBytes b;
  b.raw("GGML", 4).u32(3).u64(0).u64(0);
  expect_error(b, "not a GGUF file");
}

TEST(GgufBadFileTest, UnsupportedVersions) {
  expect_error(GgufBytes().header(1, 0, 0), "GGUF version 1 is not supported");
  expect_error(GgufBytes().header(99, 0, 0), "unsupported GGUF version 99");
  expect_error(GgufBytes().header(0x03000000, 0, 0), "big-endian");
}

TEST(GgufBadFileTest, TruncatedHeader) {
  GgufBytes b;
  b.raw("GGUF", 4).u32(3).u32(0);
  expect_error(b, "truncated while reading the tensor count");
}

TEST(GgufBadFileTest, TruncatedMetadata) {
  GgufBytes b;
  b.header(3, 0, 1).str("general.architecture").u32(8).u64(5).raw("ll", 2);
  expect_error(b, "metadata 'general.architecture' claims 5 bytes");
  GgufBytes c;
  c.header(3, 0, 1).str("k").u32(4).u8(1);
  expect_error(c, "truncated while reading metadata 'k'");
}

TEST(GgufBadFileTest, TruncatedTensorInfo) {
  GgufBytes b;
  b.header(3, 1, 0).str("weight_name").u32(2).u64(32);
  expect_error(b, "truncated while reading tensor 'weight_name' dimension");
}

TEST(GgufBadFileTest, TruncatedData) {
  GgufBytes b = valid_file();
  b.bytes.pop_back();
  expect_error(b, "tensor 'w' data [offset 0, 68 bytes] extends past end of file");
}

TEST(GgufBadFileTest, AbsurdStringLength) {
  GgufBytes b;
  b.header(3, 0, 1).u64(1ull << 60).raw("key-and-more", 12);
  expect_error(b, "metadata entry 0 key claims 1152921504606846976 bytes");
}

TEST(GgufBadFileTest, AbsurdArrayCount) {
  GgufBytes b;
  b.header(3, 0, 1).str("a").u32(9).u32(4).u64(1ull << 60).u32(1);
  expect_error(b, "metadata 'a' claims 1152921504606846976 UINT32 elements");
}

TEST(GgufBadFileTest, AbsurdCounts) {
  expect_error(GgufBytes().header(3, 0, 1ull << 60), "metadata entries, more than the file");
  expect_error(GgufBytes().header(3, 1ull << 60, 0), "tensors, more than the file");
}

TEST(GgufBadFileTest, DimensionsOverflowInt64) {
  GgufBytes b;
  b.header(3, 1, 0).tensor("w", {1ull << 32, 1ull << 32}, kF32, 0).pad_to(32);
  expect_error(b, "tensor 'w' has dimensions whose element count overflows int64");
  GgufBytes c;
  c.header(3, 1, 0).tensor("w", {1ull << 63}, kF32, 0).pad_to(32);
  expect_error(c, "overflows int64");
  GgufBytes d;
  d.header(3, 1, 0).tensor("w", {1ull << 62}, kF32, 0).pad_to(32);
  expect_error(d, "tensor 'w' byte size overflows");
}

TEST(GgufBadFileTest, TooManyDimensions) {
  GgufBytes b;
  b.header(3, 1, 0).tensor("w", {1, 1, 1, 1, 1}, kF32, 0);
  expect_error(b, "tensor 'w' has 5 dimensions");
}

TEST(GgufBadFileTest, MisalignedOrOutOfFileOffsets) {
  GgufBytes b;
  b.header(3, 1, 0).tensor("w", {8}, kF32, 4).pad_to(32).zeros(64);
  expect_error(b, "tensor 'w' data [offset 4, 32 bytes] is not aligned to 32 bytes");
  GgufBytes c;
  c.header(3, 1, 0).tensor("w", {8}, kF32, 1ull << 62).pad_to(32).zeros(64);
  expect_error(c, "extends past end of file");
  GgufBytes d;
  d.header(3, 1, 0).tensor("w", {8}, kF32, 0xFFFFFFFFFFFFFFE0ull).pad_to(32).zeros(64);
  expect_error(d, "extends past end of file");
}

TEST(GgufBadFileTest, RowsMustFillBlocks) {
  GgufBytes b;
  b.header(3, 1, 0).tensor("w", {30, 2}, kQ8_0, 0).pad_to(32).zeros(68);
  expect_error(b, "tensor 'w' has rows of 30 elements, not a multiple of Q8_0's block size 32");
}

TEST(GgufBadFileTest, UnknownTypes) {
  GgufBytes b;
  b.header(3, 1, 0).tensor("w", {8}, 99, 0).pad_to(32).zeros(64);
  expect_error(b, "tensor 'w' has unknown ggml type 99");
  GgufBytes c;
  c.header(3, 0, 1).str("k").u32(13).u32(0);
  expect_error(c, "metadata 'k' has unknown value type 13");
  GgufBytes d;
  d.header(3, 0, 1).str("k").u32(9).u32(42).u64(0);
  expect_error(d, "metadata 'k' has unknown array element type 42");
}

TEST(GgufBadFileTest, Duplicates) {
  GgufBytes b;
  b.header(3, 0, 2).kv_u32("k", 1).kv_u32("k", 2);
  expect_error(b, "metadata 'k' appears twice");
  GgufBytes c;
  c.header(3, 2, 0).tensor("w", {8}, kF32, 0).tensor("w", {8}, kF32, 32).pad_to(32).zeros(64);
  expect_error(c, "tensor 'w' appears twice");
}

TEST(GgufBadFileTest, OverlappingTensors) {
  GgufBytes b;
  b.header(3, 2, 0).tensor("a", {16}, kF32, 0).tensor("b", {8}, kF32, 32).pad_to(32).zeros(64);
  expect_error(b, "tensors 'a' and 'b' overlap");
}

TEST(GgufBadFileTest, BadAlignment) {
  GgufBytes b;
  b.header(3, 0, 1).kv_u32("general.alignment", 3);
  expect_error(b, "general.alignment must be a positive power of two");
  GgufBytes c;
  c.header(3, 0, 1).kv_u32("general.alignment", 0);
  expect_error(c, "general.alignment must be a positive power of two");
}

TEST(GgufBadFileTest, BadBoolAndDeepNesting) {
  GgufBytes b;
  b.header(3, 0, 1).str("flag").u32(7).u8(2);
  expect_error(b, "metadata 'flag' is a BOOL with byte value 2");
  GgufBytes c;
  c.header(3, 0, 1).str("deep");
  c.u32(9);
  for (int i = 0; i < 9; ++i) c.u32(9).u64(1);
  c.u32(4).u64(0);
  expect_error(c, "metadata 'deep' nests arrays more than 8 deep");
}

TEST(GgufBadFileTest, EmptyArrayAndZeroDimTensorAreValid) {
  GgufBytes b;
  b.header(3, 1, 1).str("empty").u32(9).u32(8).u64(0).tensor("s", {}, kF32, 0).pad_to(32).zeros(4);
  auto file = parse(b);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ((*file)->get_string_array("empty"), std::vector<std::string>{});
  EXPECT_EQ((*file)->tensors()[0].num_elements, 1u);
}

// Every prefix of a valid file and many random corruptions parse without crashing; prefixes
// that cut the header or the tensor infos must fail.
TEST(GgufBadFileTest, PrefixesAndBitFlipsNeverCrash) {
  const GgufBytes full = valid_file();
  auto whole = parse(full);
  ASSERT_TRUE(whole.ok());
  const std::size_t data_offset = (*whole)->data_offset();
  for (std::size_t n = 0; n < full.bytes.size(); ++n) {
    GgufBytes prefix;
    prefix.bytes.assign(full.bytes.begin(), full.bytes.begin() + n);
    EXPECT_FALSE(parse(prefix).ok()) << "prefix of " << n << " of " << data_offset << " bytes";
  }
  std::mt19937 rng(1234);
  for (int i = 0; i < 5000; ++i) {
    GgufBytes mutated = full;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      mutated.bytes[rng() % mutated.bytes.size()] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
    }
    auto file = parse(mutated);
    if (file.ok()) {
      for (const GgufTensorInfo& t : (*file)->tensors()) {
        EXPECT_LE(t.data.data() + t.data.size(), mutated.bytes.data() + mutated.bytes.size());
      }
    }
  }
}

}  // namespace
}  // namespace pagoda
