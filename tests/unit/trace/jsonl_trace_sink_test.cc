// The JSONL sink: a parseable file, rotation by size, and limits that drop (and count) instead
// of making the writer's caller wait.
#include "trace/jsonl_trace_sink.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

namespace pagoda::trace {
namespace {

namespace fs = std::filesystem;

TraceEvent event(int i, std::size_t text_bytes = 10) {
  TraceEvent e;
  e.kind = TraceEventKind::kToken;
  e.request_id = "req-" + std::to_string(i);
  e.index = i;
  e.text = std::string(text_bytes, 'x') + "\n\"";
  return e;
}

fs::path temp_dir(const std::string& name) {
  fs::path dir =
      fs::temp_directory_path() / ("pagoda_trace_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<std::string> lines_of(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(JsonlTraceSinkTest, WritesOneParseableLinePerEvent) {
  const fs::path dir = temp_dir("lines");
  const fs::path file = dir / "trace.jsonl";
  {
    auto sink = JsonlTraceSink::open({.path = file.string()});
    ASSERT_TRUE(sink.ok()) << sink.status().to_string();
    for (int i = 0; i < 100; ++i) EXPECT_TRUE((*sink)->write(event(i)));
    (*sink)->flush();
    const TraceSinkStats stats = (*sink)->stats();
    EXPECT_EQ(stats.events_written, 100);
    EXPECT_EQ(stats.events_dropped, 0);
    EXPECT_EQ(static_cast<std::uintmax_t>(stats.bytes_written), fs::file_size(file));
  }
  const auto lines = lines_of(file);
  ASSERT_EQ(lines.size(), 100u);
  for (int i = 0; i < 100; ++i) {
    const auto j = nlohmann::json::parse(lines[static_cast<std::size_t>(i)]);
    EXPECT_EQ(j["index"], i);  // in order
  }
  fs::remove_all(dir);
}

TEST(JsonlTraceSinkTest, RotatesBySize) {
  const fs::path dir = temp_dir("rotate");
  const fs::path file = dir / "trace.jsonl";
  {
    auto sink =
        JsonlTraceSink::open({.path = file.string(), .max_file_bytes = 4096, .max_files = 2});
    ASSERT_TRUE(sink.ok());
    for (int i = 0; i < 200; ++i) (*sink)->write(event(i, 100));
    (*sink)->flush();
  }
  ASSERT_TRUE(fs::exists(dir / "trace.1.jsonl"));
  ASSERT_TRUE(fs::exists(dir / "trace.2.jsonl"));
  EXPECT_FALSE(fs::exists(dir / "trace.3.jsonl"));
  for (const char* name : {"trace.jsonl", "trace.1.jsonl", "trace.2.jsonl"}) {
    EXPECT_LE(fs::file_size(dir / name), 4096u);
    for (const std::string& line : lines_of(dir / name)) {
      EXPECT_TRUE(nlohmann::json::accept(line)) << line;
    }
  }
  fs::remove_all(dir);
}

// An spdlog sink that takes `delay` per line: a disk that cannot keep up.
class SlowSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit SlowSink(std::chrono::milliseconds delay) : delay_(delay) {}
  int lines = 0;

 protected:
  void sink_it_(const spdlog::details::log_msg&) override {
    std::this_thread::sleep_for(delay_);
    ++lines;
  }
  void flush_() override {}

 private:
  std::chrono::milliseconds delay_;
};

TEST(JsonlTraceSinkTest, SlowSinkCausesDropsNotWaits) {
  auto slow = std::make_shared<SlowSink>(std::chrono::milliseconds(20));
  auto sink = JsonlTraceSink::open({.max_queue_bytes = 4096, .sink_override = slow});
  ASSERT_TRUE(sink.ok());
  const auto start = std::chrono::steady_clock::now();
  int accepted = 0;
  for (int i = 0; i < 1000; ++i) accepted += (*sink)->write(event(i, 100)) ? 1 : 0;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // 1000 writes through a 20 ms/line disk would take 20 s if the caller waited; it must not.
  EXPECT_LT(seconds, 2.0);
  const TraceSinkStats stats = (*sink)->stats();
  EXPECT_GT(stats.events_dropped, 900);
  EXPECT_EQ(stats.events_dropped + accepted, 1000);
  EXPECT_LE((*sink)->queued_bytes(), 4096u);
  (*sink)->flush();
  EXPECT_EQ((*sink)->stats().events_written, accepted);
  EXPECT_EQ((*sink)->queued_bytes(), 0u);  // every queued event's memory was given back
}

TEST(JsonlTraceSinkTest, ByteRateLimitDropsTheExcess) {
  const fs::path dir = temp_dir("rate");
  auto sink =
      JsonlTraceSink::open({.path = (dir / "t.jsonl").string(), .max_bytes_per_second = 2000.0});
  ASSERT_TRUE(sink.ok());
  for (int i = 0; i < 100; ++i) EXPECT_TRUE((*sink)->write(event(i, 100)));
  (*sink)->flush();
  // One second's burst of ~150-byte lines: about 13 are written, the rest dropped at once.
  const TraceSinkStats stats = (*sink)->stats();
  EXPECT_GE(stats.events_written, 5);
  EXPECT_LE(stats.events_written, 20);
  EXPECT_EQ(stats.events_dropped, 100 - stats.events_written);
  EXPECT_LE(stats.bytes_written, 2000);
  fs::remove_all(dir);
}

TEST(JsonlTraceSinkTest, RejectsBadSettings) {
  EXPECT_FALSE(JsonlTraceSink::open({.path = ""}).ok());
  EXPECT_FALSE(JsonlTraceSink::open({.path = "/proc/pagoda-no-such-dir/trace.jsonl"}).ok());
  EXPECT_FALSE(JsonlTraceSink::open({.path = "/tmp/t.jsonl", .max_queue_bytes = 0}).ok());
}

}  // namespace
}  // namespace pagoda::trace
