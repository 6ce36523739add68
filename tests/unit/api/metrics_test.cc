#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "api/histogram.h"
#include "api/prometheus_writer.h"
#include "api/serving_metrics.h"

namespace pagoda::api {
namespace {

TEST(HistogramTest, BucketsAreInclusiveAndCumulative) {
  Histogram h({0.1, 1.0, 10.0});
  for (const double v : {0.05, 0.1, 0.5, 1.0, 5.0, 50.0}) h.observe(v);
  h.observe(std::nan(""));
  const Histogram::Snapshot s = h.snapshot();
  EXPECT_EQ(s.cumulative, (std::vector<std::int64_t>{2, 4, 5}));
  EXPECT_EQ(s.count, 6);
  EXPECT_DOUBLE_EQ(s.sum, 56.65);
}

TEST(HistogramTest, ConcurrentObservationsAreAllCounted) {
  Histogram h({1.0});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&h] {
      for (int i = 0; i < 10000; ++i) h.observe(0.5);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(h.snapshot().count, 40000);
  EXPECT_EQ(h.snapshot().cumulative[0], 40000);
}

TEST(PrometheusWriterTest, WritesFamiliesSamplesAndHistograms) {
  PrometheusWriter w;
  w.family("pagoda:x_total", "counter", "Help with a \\ backslash\nand newline.");
  w.sample("pagoda:x_total", {{"model_name", "a\"b\\c\nd"}}, 3);
  Histogram h({0.5, 2.0});
  h.observe(1.0);
  w.family("pagoda:h_seconds", "histogram", "H.");
  w.histogram("pagoda:h_seconds", {{"model_name", "m"}}, h.snapshot());
  EXPECT_EQ(w.text(),
            "# HELP pagoda:x_total Help with a \\\\ backslash\\nand newline.\n"
            "# TYPE pagoda:x_total counter\n"
            "pagoda:x_total{model_name=\"a\\\"b\\\\c\\nd\"} 3\n"
            "# HELP pagoda:h_seconds H.\n"
            "# TYPE pagoda:h_seconds histogram\n"
            "pagoda:h_seconds_bucket{model_name=\"m\",le=\"0.5\"} 0\n"
            "pagoda:h_seconds_bucket{model_name=\"m\",le=\"2\"} 1\n"
            "pagoda:h_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 1\n"
            "pagoda:h_seconds_sum{model_name=\"m\"} 1\n"
            "pagoda:h_seconds_count{model_name=\"m\"} 1\n");
}

TEST(PrometheusWriterTest, NumbersReadBack) {
  EXPECT_EQ(prometheus_number(0.1), "0.1");
  EXPECT_EQ(prometheus_number(1e6), "1000000");
  EXPECT_EQ(prometheus_number(1.5e-7), "1.5e-07");
  EXPECT_EQ(prometheus_number(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(prometheus_number(std::nan("")), "NaN");
}

// A final output; reason "error" is an abort the engine gave an error status.
engine::StreamOutput finished(std::string_view reason, std::int64_t prompt,
                              std::int64_t completion) {
  engine::StreamOutput item;
  engine::RequestOutput& out = item.output;
  out.finished = true;
  out.status = reason == "stop"     ? engine::RequestStatus::kFinishedStopped
               : reason == "length" ? engine::RequestStatus::kFinishedLength
                                    : engine::RequestStatus::kFinishedAborted;
  out.usage = {.num_prompt_tokens = prompt,
               .num_completion_tokens = completion,
               .num_cached_prompt_tokens = 16};
  out.timings.arrival_time = 10.0;
  out.timings.first_scheduled_time = 10.25;
  out.timings.first_token_time = 10.5;
  out.timings.last_token_time = 11.5;
  out.timings.finished_time = 11.5;
  out.timings.inter_token_latencies = {0.5, 0.5};
  if (reason == "error") item.error = Status(StatusCode::kUnavailable, "shut down");
  return item;
}

// The value of the sample line that starts with `prefix` followed by a space.
std::optional<std::string> sample_value(const std::string& text, const std::string& prefix) {
  const std::size_t at = text.find("\n" + prefix + " ");
  if (at == std::string::npos) return std::nullopt;
  const std::size_t begin = at + prefix.size() + 2;
  return text.substr(begin, text.find('\n', begin) - begin);
}

TEST(ServingMetricsTest, RendersTheVllmMirroringSet) {
  ServingMetrics metrics("smol", 2048);
  metrics.record_finished(finished("stop", 100, 3));
  metrics.record_finished(finished("length", 50, 7));
  metrics.record_rejected(400);
  metrics.record_rejected(400);
  metrics.record_rejected(429);
  engine::EngineStats stats{.num_running = 2,
                            .num_waiting = 5,
                            .kv_cache_usage = 0.25,
                            .num_kv_blocks = 100,
                            .num_preemptions = 1,
                            .prefix_cache_queries = 64,
                            .prefix_cache_hits = 32,
                            .num_steps = 9,
                            .num_failed_steps = 0,
                            .num_generated_tokens = 12,
                            .running = true};
  const std::string text = "\n" + metrics.render(stats);
  const std::string m = "{model_name=\"smol\"}";
  EXPECT_EQ(sample_value(text, "pagoda:num_requests_running" + m), "2");
  EXPECT_EQ(sample_value(text, "pagoda:num_requests_waiting" + m), "5");
  EXPECT_EQ(sample_value(text, "pagoda:kv_cache_usage_perc" + m), "0.25");
  EXPECT_EQ(sample_value(text, "pagoda:num_preemptions_total" + m), "1");
  EXPECT_EQ(sample_value(text, "pagoda:prefix_cache_queries_total" + m), "64");
  EXPECT_EQ(sample_value(text, "pagoda:prefix_cache_hits_total" + m), "32");
  EXPECT_EQ(sample_value(text, "pagoda:generation_tokens_total" + m), "12");
  EXPECT_EQ(sample_value(text, "pagoda:prompt_tokens_total" + m), "150");
  EXPECT_EQ(sample_value(text, "pagoda:prompt_tokens_cached_total" + m), "32");
  EXPECT_EQ(sample_value(
                text, "pagoda:request_success_total{model_name=\"smol\",finished_reason=\"stop\"}"),
            "1");
  EXPECT_EQ(
      sample_value(text,
                   "pagoda:request_success_total{model_name=\"smol\",finished_reason=\"length\"}"),
      "1");
  EXPECT_EQ(
      sample_value(text,
                   "pagoda:request_success_total{model_name=\"smol\",finished_reason=\"abort\"}"),
      "0");
  EXPECT_EQ(
      sample_value(text, "pagoda:request_rejected_total{model_name=\"smol\",status_code=\"400\"}"),
      "2");
  EXPECT_EQ(sample_value(text, "pagoda:time_to_first_token_seconds_count" + m), "2");
  EXPECT_EQ(sample_value(text, "pagoda:time_to_first_token_seconds_sum" + m), "1");
  EXPECT_EQ(sample_value(
                text, "pagoda:time_to_first_token_seconds_bucket{model_name=\"smol\",le=\"0.25\"}"),
            "0");
  EXPECT_EQ(sample_value(
                text, "pagoda:time_to_first_token_seconds_bucket{model_name=\"smol\",le=\"0.5\"}"),
            "2");
  EXPECT_EQ(sample_value(text, "pagoda:inter_token_latency_seconds_count" + m), "4");
  EXPECT_EQ(sample_value(text, "pagoda:e2e_request_latency_seconds_sum" + m), "3");
  EXPECT_EQ(sample_value(text, "pagoda:request_queue_time_seconds_sum" + m), "0.5");
  EXPECT_EQ(sample_value(text, "pagoda:request_prefill_time_seconds_sum" + m), "0.5");
  EXPECT_EQ(sample_value(text, "pagoda:request_decode_time_seconds_sum" + m), "2");
  EXPECT_EQ(sample_value(text, "pagoda:request_inference_time_seconds_sum" + m), "2.5");
  // TPOT: (11.5 - 10.5) / (3 - 1) and / (7 - 1).
  EXPECT_EQ(sample_value(text, "pagoda:request_time_per_output_token_seconds_count" + m), "2");
  EXPECT_EQ(sample_value(text, "pagoda:request_prompt_tokens_sum" + m), "150");
  EXPECT_EQ(
      sample_value(text, "pagoda:request_prompt_tokens_bucket{model_name=\"smol\",le=\"2000\"}"),
      "2");
  EXPECT_EQ(text.find("le=\"5000\""), std::string::npos) << "buckets stop at max_model_len";
  EXPECT_EQ(sample_value(text, "pagoda:request_generation_tokens_sum" + m), "10");
}

TEST(ServingMetricsTest, RendersTheStructuredOutputCompiler) {
  ServingMetrics metrics("smol", 2048);
  structured::CompilerStats compiles{.cache_queries = 9,
                                     .cache_hits = 3,
                                     .waits_started = 6,
                                     .waits_finished = {2, 1, 1, 1, 1, 0},
                                     .compiles = 4,
                                     .compile_seconds = 1.5,
                                     .compiles_finished = 3,
                                     .queued = 1,
                                     .running = 1};
  compiles.compile_time_buckets[0] = 1;                                       // <= 1 ms
  compiles.compile_time_buckets[8] = 1;                                       // <= 1 s
  compiles.compile_time_buckets[structured::kCompileTimeBuckets.size()] = 1;  // > 40 s
  const std::string text = "\n" + metrics.render({}, &compiles);
  const std::string m = "{model_name=\"smol\"}";
  EXPECT_EQ(sample_value(text, "pagoda:structured_output_compile_cache_queries_total" + m), "9");
  EXPECT_EQ(sample_value(text, "pagoda:structured_output_compile_cache_hits_total" + m), "3");
  EXPECT_EQ(sample_value(text, "pagoda:structured_output_compiles_started_total" + m), "6");
  const std::pair<const char*, const char*> outcomes[] = {{"ok", "2"},        {"invalid", "1"},
                                                          {"timeout", "1"},   {"queue_full", "1"},
                                                          {"cancelled", "1"}, {"shutdown", "0"}};
  for (const auto& [outcome, value] : outcomes) {
    EXPECT_EQ(sample_value(text, std::string("pagoda:structured_output_compiles_finished_total{"
                                             "model_name=\"smol\",outcome=\"") +
                                     outcome + "\"}"),
              value)
        << outcome;
  }
  const std::string bucket =
      "pagoda:structured_output_compile_time_seconds_bucket{model_name=\"smol\",le=";
  EXPECT_EQ(sample_value(text, bucket + "\"0.001\"}"), "1");
  EXPECT_EQ(sample_value(text, bucket + "\"0.5\"}"), "1");
  EXPECT_EQ(sample_value(text, bucket + "\"1\"}"), "2");
  EXPECT_EQ(sample_value(text, bucket + "\"40\"}"), "2");
  EXPECT_EQ(sample_value(text, bucket + "\"+Inf\"}"), "3");
  EXPECT_EQ(sample_value(text, "pagoda:structured_output_compile_time_seconds_count" + m), "3");
  EXPECT_EQ(sample_value(text, "pagoda:structured_output_compile_time_seconds_sum" + m), "1.5");
  EXPECT_EQ(sample_value(text, "pagoda:structured_output_compile_queue_depth" + m), "1");
  EXPECT_EQ(sample_value(text, "pagoda:structured_output_compiles_running" + m), "1");
  // Without a compiler (no structured outputs) the family is absent.
  EXPECT_EQ(metrics.render({}).find("structured_output_compile"), std::string::npos);
}

// Requests that end without a normal finish count like any other: a client that left mid-stream
// (abort), one that left during its prefill (abort, no first token), an engine failure (error).
TEST(ServingMetricsTest, AbortsAndErrorsAreCountedWithTheirTokens) {
  ServingMetrics metrics("smol", 2048);
  metrics.record_finished(finished("abort", 20, 5));
  engine::StreamOutput prefill = finished("abort", 900, 0);
  prefill.output.timings.first_token_time.reset();
  prefill.output.timings.last_token_time.reset();
  prefill.output.timings.inter_token_latencies.clear();
  metrics.record_finished(prefill);
  metrics.record_finished(finished("error", 7, 1));
  const std::string text = "\n" + metrics.render({});
  const std::string m = "{model_name=\"smol\"}";
  const auto success = [&](std::string_view reason) {
    return sample_value(text,
                        "pagoda:request_success_total{model_name=\"smol\",finished_reason=\"" +
                            std::string(reason) + "\"}");
  };
  EXPECT_EQ(success("stop"), "0");
  EXPECT_EQ(success("abort"), "2");
  EXPECT_EQ(success("error"), "1");
  EXPECT_EQ(sample_value(text, "pagoda:prompt_tokens_total" + m), "927");
  EXPECT_EQ(sample_value(text, "pagoda:request_prompt_tokens_count" + m), "3");
  EXPECT_EQ(sample_value(text, "pagoda:request_prompt_tokens_sum" + m), "927");
  EXPECT_EQ(sample_value(text, "pagoda:request_generation_tokens_count" + m), "3");
  EXPECT_EQ(sample_value(text, "pagoda:request_generation_tokens_sum" + m), "6");
  EXPECT_EQ(sample_value(text, "pagoda:e2e_request_latency_seconds_count" + m), "3");
  EXPECT_EQ(sample_value(text, "pagoda:request_queue_time_seconds_count" + m), "3");
  // The abandoned prefill never had a first token.
  EXPECT_EQ(sample_value(text, "pagoda:time_to_first_token_seconds_count" + m), "2");
  EXPECT_EQ(sample_value(text, "pagoda:request_prefill_time_seconds_count" + m), "2");
}

struct PromtoolResult {
  int exit_code = -1;
  std::string output;
};

PromtoolResult promtool_check(const std::string& text) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("pagoda_metrics_" + std::to_string(::getpid()) + ".txt");
  std::ofstream(path) << text;
  const std::string command = "promtool check metrics < " + path.string() + " 2>&1";
  PromtoolResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[512];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) result.output += buffer;
  const int status = ::pclose(pipe);
  std::filesystem::remove(path);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// promtool, Prometheus's own checker, is the oracle for the exposition format. It parses the
// text (exit 1 on any format error) and lints it (exit 3); its linter flags the colon of the
// vLLM-style "pagoda:" names and nothing else, which the same text with "pagoda_" proves.
TEST(ServingMetricsTest, PromtoolAcceptsTheRendering) {
  if (std::system("command -v promtool > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool is not installed (apt-get install prometheus); CI installs it";
  }
  ServingMetrics metrics("smol \"quoted\"\\", 4096);
  metrics.record_finished(finished("stop", 10, 4));
  metrics.record_finished(finished("abort", 3, 0));
  metrics.record_rejected(400);
  const std::string text = metrics.render({.num_running = 1, .kv_cache_usage = 0.5});

  const PromtoolResult as_served = promtool_check(text);
  ASSERT_NE(as_served.exit_code, 1) << "promtool cannot parse the exposition:\n"
                                    << as_served.output;
  std::istringstream lines(as_served.output);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_TRUE(line.ends_with("metric names should not contain ':'")) << line;
  }

  std::string underscored = text;
  for (std::size_t at = 0; (at = underscored.find("pagoda:", at)) != std::string::npos;) {
    underscored[at + 6] = '_';
  }
  const PromtoolResult strict = promtool_check(underscored);
  EXPECT_EQ(strict.exit_code, 0) << strict.output;
  EXPECT_EQ(strict.output, "");
}

}  // namespace
TEST(ServingMetricsTest, RendersSpeculativeDecodingCountersPerPosition) {
  ServingMetrics metrics("smol", 2048);
  engine::EngineStats stats;
  stats.spec_decode.num_drafts = 10;
  stats.spec_decode.num_draft_tokens = 30;
  stats.spec_decode.num_accepted_tokens = 17;
  stats.spec_decode.num_accepted_tokens_per_pos = {9, 6, 2};
  const std::string text = "\n" + metrics.render(stats);
  const std::string m = "{model_name=\"smol\"}";
  EXPECT_EQ(sample_value(text, "pagoda:spec_decode_num_drafts_total" + m), "10");
  EXPECT_EQ(sample_value(text, "pagoda:spec_decode_num_draft_tokens_total" + m), "30");
  EXPECT_EQ(sample_value(text, "pagoda:spec_decode_num_accepted_tokens_total" + m), "17");
  const std::string per_pos = "pagoda:spec_decode_num_accepted_tokens_per_pos_total";
  EXPECT_EQ(sample_value(text, per_pos + "{model_name=\"smol\",position=\"0\"}"), "9");
  EXPECT_EQ(sample_value(text, per_pos + "{model_name=\"smol\",position=\"2\"}"), "2");
  EXPECT_EQ(text.find("position=\"3\""), std::string::npos);
}

TEST(ServingMetricsTest, RendersDeviceBusyAndIdleTime) {
  ServingMetrics metrics("smol", 2048);
  engine::EngineStats stats;
  stats.device_time = {.steps = 7, .busy_seconds = 1.5, .idle_seconds = 0.25};
  const std::string text = "\n" + metrics.render(stats);
  const std::string m = "{model_name=\"smol\"}";
  EXPECT_EQ(sample_value(text, "pagoda:device_steps_total" + m), "7");
  EXPECT_EQ(sample_value(text, "pagoda:device_busy_seconds_total" + m), "1.5");
  EXPECT_EQ(sample_value(text, "pagoda:device_idle_seconds_total" + m), "0.25");
}

}  // namespace pagoda::api
