#include "cli/trace_options.h"

#include <memory>
#include <sstream>
#include <vector>

#include "trace/jsonl_trace_sink.h"

namespace pagoda::cli {

void TraceOptions::add_to(CLI::App& app) {
  app.add_option("--trace-file", file,
                 "Write reasoning traces (JSONL, rotated by size) of traced requests here");
  app.add_flag("--trace-null-sink", null_sink,
               "Produce trace events but write none (measures the engine's share of the cost)");
  app.add_option("--trace-sample-rate", sample_rate,
                 "Fraction of requests traced besides those that ask (X-Pagoda-Trace)")
      ->capture_default_str();
  app.add_option("--trace-top-n", top_n, "Alternatives recorded per traced token")
      ->capture_default_str();
  app.add_option("--trace-max-bytes-per-second", max_bytes_per_second,
                 "Trace bytes accepted per second (bursts of one second); 0: no limit")
      ->capture_default_str();
  app.add_option("--trace-queue-bytes", max_queue_bytes,
                 "Memory for trace events waiting to be written; past it they are dropped")
      ->capture_default_str();
  app.add_option("--trace-file-bytes", max_file_bytes, "Rotate the trace file at this size")
      ->capture_default_str();
  app.add_option("--trace-files", max_files, "Rotated trace files kept")->capture_default_str();
}

Status TraceOptions::apply(engine::EngineConfig& config) const {
  config.trace_sample_rate = sample_rate;
  config.trace_top_n = top_n;
  if (null_sink) {
    config.trace_sink = std::make_shared<trace::NullTraceSink>();
    return Status::ok_status();
  }
  if (file.empty()) {
    if (sample_rate > 0.0) return invalid_argument("--trace-sample-rate needs --trace-file");
    return Status::ok_status();
  }
  if (max_queue_bytes <= 0 || max_file_bytes <= 0 || max_files < 0) {
    return invalid_argument(
        "--trace-queue-bytes and --trace-file-bytes must be > 0, "
        "--trace-files >= 0");
  }
  PAGODA_ASSIGN_OR_RETURN(
      std::unique_ptr<trace::JsonlTraceSink> sink,
      trace::JsonlTraceSink::open({.path = file,
                                   .max_file_bytes = static_cast<std::size_t>(max_file_bytes),
                                   .max_files = static_cast<std::size_t>(max_files),
                                   .max_queue_bytes = static_cast<std::size_t>(max_queue_bytes),
                                   .max_bytes_per_second = max_bytes_per_second}));
  config.trace_sink = std::move(sink);
  return Status::ok_status();
}

void ReasoningOptions::add_to(CLI::App& app) {
  app.add_option("--reasoning-parser", parser,
                 "The model thinks between tags: deepseek_r1, qwen3 or think (<think>...</think>)");
  app.add_option("--reasoning-effort-budgets", effort_budgets,
                 "Reasoning tokens for reasoning_effort low,medium,high")
      ->capture_default_str();
}

Status ReasoningOptions::apply(engine::EngineConfig& config) const {
  std::vector<std::int64_t> budgets;
  std::stringstream in(effort_budgets);
  for (std::string item; std::getline(in, item, ',');) {
    try {
      std::size_t used = 0;
      budgets.push_back(std::stoll(item, &used));
      if (used != item.size() || budgets.back() < 0) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      return invalid_argument("--reasoning-effort-budgets: \"" + item +
                              "\" is not a number of tokens");
    }
  }
  if (budgets.size() != 3) {
    return invalid_argument("--reasoning-effort-budgets takes three numbers: low,medium,high");
  }
  config.reasoning_effort_budgets = {budgets[0], budgets[1], budgets[2]};
  if (parser.empty()) return Status::ok_status();
  PAGODA_ASSIGN_OR_RETURN(config.reasoning, engine::reasoning_tags_for_parser(parser));
  return Status::ok_status();
}

}  // namespace pagoda::cli
