#include "common/mapped_file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/check.h"

namespace pagoda {
namespace {

TEST(MappedFileTest, MapsContents) {
  auto path = std::filesystem::temp_directory_path() / "pagoda_mapped_file_test.bin";
  {
    std::ofstream out(path, std::ios::binary);
    out << "hello";
  }
  auto mf = MappedFile::open(path.string());
  ASSERT_TRUE(mf.ok()) << mf.status().to_string();
  ASSERT_EQ((*mf)->size(), 5u);
  EXPECT_EQ((*mf)->bytes()[0], 'h');
  std::filesystem::remove(path);
}

TEST(MappedFileTest, MissingFileIsNotFound) {
  auto mf = MappedFile::open("/nonexistent/pagoda/file.gguf");
  ASSERT_FALSE(mf.ok());
  EXPECT_EQ(mf.status().code(), StatusCode::kNotFound);
  EXPECT_NE(mf.status().message().find("/nonexistent/pagoda/file.gguf"), std::string::npos);
}

TEST(MappedFileTest, FolderIsInvalidArgument) {
  auto mf = MappedFile::open(std::filesystem::temp_directory_path().string());
  ASSERT_FALSE(mf.ok());
  EXPECT_EQ(mf.status().code(), StatusCode::kInvalidArgument);
}

TEST(CheckDeathTest, CheckAbortsWithLocation) {
  EXPECT_DEATH(PAGODA_CHECK(1 + 1 == 3) << "arithmetic",
               "mapped_file_test.cc:[0-9]+: CHECK failed");
}

}  // namespace
}  // namespace pagoda
