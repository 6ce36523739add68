// The `pagoda` subcommands. Each registers its flags on the CLI11 app and runs after parsing,
// returning the process exit code; errors go to stderr as "pagoda: error: ...".
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/device_options.h"
#include "cli/load_options.h"
#include "cli/quantization_options.h"
#include "cli/speculative_options.h"
#include "cli/trace_options.h"
#include "pagoda/status.h"

namespace pagoda::cli {

/// Prints `status` as a one-line error and returns exit code 1.
int report_error(const Status& status);

/// `pagoda inspect [MODEL] [--json]`.
struct InspectCommand {
  std::string model;
  bool json = false;
  CLI::App* add_to(CLI::App& app);
  int run(const char* argv0) const;
};

/// `pagoda tokenize [MODEL] (--text TEXT | --ids JSON)`.
struct TokenizeCommand {
  std::string model;
  std::string text;
  std::string ids;
  bool no_special_tokens = false;
  bool plain_special_text = false;
  bool skip_special_tokens = false;
  CLI::Option* text_option = nullptr;
  CLI::Option* ids_option = nullptr;
  CLI::App* add_to(CLI::App& app);
  int run(const char* argv0) const;
};

/// `pagoda chat-template [MODEL] --messages JSON`.
struct ChatTemplateCommand {
  std::string model;
  std::string messages;
  std::string tools;
  std::string chat_template_path;
  std::string kwargs;
  bool no_generation_prompt = false;
  bool tokenize = false;
  CLI::App* add_to(CLI::App& app);
  int run(const char* argv0) const;
};

/// `pagoda generate [MODEL] (--prompt TEXT | --chat TEXT)`: one sequence on the GPU or the CPU,
/// streamed.
struct GenerateCommand {
  std::string model;
  std::string prompt;
  std::string chat;
  std::string system;
  std::string chat_template_path;
  std::int64_t max_tokens = 128;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<std::int64_t> top_k;
  std::optional<double> min_p;
  std::optional<std::uint64_t> seed;
  bool ignore_eos = false;
  int threads = 0;
  std::int64_t block_size = 16;
  std::int64_t max_model_len = 0;
  /// --disable-hybrid-kv-cache-manager: one KV table for every layer (docs/kv_cache_groups.md).
  bool disable_hybrid_kv_cache_manager = false;
  DeviceOptions device;
  LoadOptions load;
  /// Given: the engine runs the one sequence, with speculative decoding.
  SpeculativeOptions speculative;
  QuantizationOptions quantization;
  CLI::App* add_to(CLI::App& app);
  int run(const char* argv0) const;
};

/// `pagoda bench offline [MODEL] --num-prompts N --input-len I --output-len O`: throughput of
/// N prompts through the engine against a single stream of the same lengths.
struct BenchCommand {
  std::string model;
  std::int64_t num_prompts = 16;
  std::int64_t input_len = 128;
  std::int64_t output_len = 64;
  std::int64_t max_num_seqs = 256;
  std::int64_t max_num_batched_tokens = 2048;
  bool async_scheduling = false;              ///< --async-scheduling: overlapped steps
  std::optional<double> step_time_target_ms;  ///< --step-time-target-ms; unset: per device
  std::optional<std::int64_t> kv_cache_memory;
  /// --disable-hybrid-kv-cache-manager: one KV table for every layer (docs/kv_cache_groups.md).
  bool disable_hybrid_kv_cache_manager = false;
  std::uint64_t seed = 0;
  int threads = 0;
  bool no_single_stream = false;
  /// Times the concurrent batch and the single stream alternate; each side's runs are pooled.
  std::int64_t rounds = 1;
  /// random: random-token prompts; grounded: chat prompts asking to repeat a given text, so
  /// the answer copies its input (n-gram speculation's case).
  std::string workload = "random";
  DeviceOptions device;
  LoadOptions load;
  QuantizationOptions quantization;
  TraceOptions trace;
  SpeculativeOptions speculative;
  CLI::App* add_to(CLI::App& app);
  int run(const char* argv0) const;
};

/// `pagoda perplexity [MODEL] --text-file F [--ctx 512]`: perplexity of the model on a text over
/// non-overlapping windows, on the CPU or the GPU (--device), to check what a quantization or a
/// backend costs in accuracy.
struct PerplexityCommand {
  std::string model;
  std::string text_file;
  std::int64_t ctx = 512;
  std::int64_t max_windows = 0;
  int threads = 0;
  bool json = false;
  QuantizationOptions quantization;
  DeviceOptions device;
  CLI::App* add_to(CLI::App& app);
  int run(const char* argv0) const;
};

/// `pagoda serve [MODEL] [--host H] [--port P] [vLLM flags...] [--config FILE.yaml]`: the
/// OpenAI-compatible HTTP server on the engine (GPU or CPU), until SIGTERM or SIGINT.
struct ServeCommand {
  std::string model;
  std::string config_path;
  std::string host = "127.0.0.1";
  int port = 8000;
  /// gRPC API port (built with gRPC only); 0 turns the gRPC server off.
  int grpc_port = 50051;
  std::vector<std::string> served_model_names;
  std::string api_key;
  std::string chat_template_path;
  std::int64_t max_model_len = 0;
  std::int64_t max_num_seqs = 256;
  std::int64_t max_num_batched_tokens = 2048;
  bool async_scheduling = false;              ///< --async-scheduling: overlapped steps
  std::optional<double> step_time_target_ms;  ///< --step-time-target-ms; unset: per device
  std::int64_t max_waiting_requests = 1024;
  std::int64_t block_size = 16;
  std::optional<std::int64_t> kv_cache_memory;
  /// --disable-hybrid-kv-cache-manager: one KV table for every layer (docs/kv_cache_groups.md).
  bool disable_hybrid_kv_cache_manager = false;
  /// Seeds the draws of requests without a seed (vLLM's --seed); unset: random.
  std::optional<std::uint64_t> seed;
  int threads = 0;
  int http_threads = 2;
  std::int64_t max_request_body_bytes = 8 * 1024 * 1024;
  double header_timeout_seconds = 10;
  double idle_timeout_seconds = 60;
  double shutdown_grace_seconds = 30;
  bool disable_log_requests = false;
  /// --enable-auto-tool-choice / --tool-call-parser (vLLM's): tool_choice "auto" reads calls
  /// out of the output in this format (hermes, llama3_json, mistral).
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;
  DeviceOptions device;
  LoadOptions load;
  QuantizationOptions quantization;
  TraceOptions trace;
  ReasoningOptions reasoning;
  SpeculativeOptions speculative;
  CLI::App* app = nullptr;
  CLI::App* add_to(CLI::App& parent);
  int run(const char* argv0);
};

}  // namespace pagoda::cli
