// `pagoda serve`: listen first (so /health can answer 503), load the model on a helper thread
// while the main thread reports progress, then wait for SIGTERM/SIGINT and drain.
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "api/served_model.h"
#include "cli/commands.h"
#include "cli/config_file.h"
#include "cli/env_options.h"
#include "cli/model_assets.h"
#include "engine/model_engine.h"
#include "server/http_server.h"
#include "server/openai_service.h"
#if PAGODA_HAVE_GRPC
#include "grpc/grpc_server.h"
#include "tools/tool_call_format.h"
#endif

namespace pagoda::cli {

namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(seconds * 1000.0)));
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Thousands of keep-alive connections need as many descriptors; the soft limit is often 1024.
void raise_open_file_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) == 0) return;
  spdlog::warn("could not raise the open-file limit: at most {} connections", limit.rlim_cur);
}

// The name clients put in `model` when none is given: MODEL as given on the command line, in
// PAGODA_MODEL or in the config file (vLLM's rule), or for the default model its file name
// without the extension.
std::vector<std::string> served_names(const ServeCommand& cmd, const std::string& path) {
  if (!cmd.served_model_names.empty()) return cmd.served_model_names;
  if (!cmd.model.empty()) return {cmd.model};
  return {std::filesystem::path(path).stem().string()};
}

// Which flag decided the KV pool's size (engine_config.h and model_engine.h have the rules).
std::string kv_sizing_rule(const ServeCommand& cmd, const engine::ExecutorOptions& executor) {
  if (cmd.kv_cache_memory) return "--kv-cache-memory";
  if (executor.device == engine::Device::kCuda) {
    return fmt::format("--gpu-memory-utilization {:.2f}", executor.gpu_memory_utilization);
  }
  return "the default CPU budget";
}

// Everything that needs the model, run off the main thread while /health says 503.
struct ModelLoader {
  std::unique_ptr<engine::EngineClient> engine;
  std::shared_ptr<server::OpenAiService> service;
  std::string architecture;  // for gRPC GetModelInfo
  Status status;
  std::atomic<bool> done{false};

  void load(const ServeCommand& cmd, const std::string& path,
            const engine::ExecutorOptions& executor) {
    status = try_load(cmd, path, executor);
    done.store(true);
  }

  Status try_load(const ServeCommand& cmd, const std::string& path,
                  const engine::ExecutorOptions& executor) {
    const auto start = Clock::now();
    spdlog::info("loading {}: model files, tokenizer and chat template", path);
    // Opened once: the frontend and the engine share the files and the tokenizer.
    PAGODA_ASSIGN_OR_RETURN(LoadedModel loaded, cmd.load.open(path, executor.load_format));
    const std::shared_ptr<const ModelFiles> files = loaded.files;
    architecture = files->config.architecture;
    const std::shared_ptr<const Tokenizer> tokenizer = loaded.tokenizer;
    std::optional<ChatTemplate> chat_template;
    auto loaded_template =
        load_model_chat_template(*loaded.tokenizer_files, cmd.chat_template_path);
    if (loaded_template.ok()) {
      chat_template = std::move(*loaded_template);
    } else if (!cmd.chat_template_path.empty() || loaded.tokenizer_files->chat_template) {
      return loaded_template.status();  // a template that exists but does not compile
    } else {
      spdlog::warn("{}: no chat template; /v1/chat/completions will answer 400",
                   loaded.tokenizer_files->path);
    }
    engine::StartupReport startup;
    startup.add("tokenizer", seconds_since(start));

    spdlog::info("loading weights onto {} and allocating the KV cache",
                 cmd.device.label(executor.device));
    engine::EngineOptions options{
        .model_path = path, .files = files, .tokenizer = tokenizer, .executor = executor};
    options.startup = &startup;
    engine::EngineConfig& config = options.engine;
    config.scheduler.max_model_len = cmd.max_model_len;
    config.scheduler.max_num_seqs = cmd.max_num_seqs;
    config.scheduler.max_num_batched_tokens = cmd.max_num_batched_tokens;
    config.cache.block_size = cmd.block_size;
    config.kv_cache_memory_bytes = cmd.kv_cache_memory;
    config.disable_hybrid_kv_cache_manager = cmd.disable_hybrid_kv_cache_manager;
    config.max_waiting_requests = cmd.max_waiting_requests;
    config.seed = cmd.seed;
    config.async_scheduling = cmd.async_scheduling;
    PAGODA_ASSIGN_OR_RETURN(
        config.step_time_target_seconds,
        cli::step_time_target_seconds(cmd.step_time_target_ms, executor.device));
    PAGODA_RETURN_IF_ERROR(cmd.trace.apply(config));
    PAGODA_RETURN_IF_ERROR(cmd.reasoning.apply(config));
    PAGODA_RETURN_IF_ERROR(cmd.speculative.apply(config));
    PAGODA_ASSIGN_OR_RETURN(engine, engine::open_engine(std::move(options)));
    const engine::EngineConfig& resolved = engine->config();

    PAGODA_ASSIGN_OR_RETURN(
        api::ServedModel model,
        api::make_served_model(served_names(cmd, path), path, tokenizer, std::move(chat_template),
                               resolved.scheduler.max_model_len, files->generation));
    // Token ids in requests are checked against the model's vocabulary, which may be larger
    // than the tokenizer's (--tokenizer, padded embeddings); ids the tokenizer lacks decode to "".
    if (files->config.vocab_size > 0) model.vocab_size = files->config.vocab_size;
    if (resolved.reasoning) model.reasoning = resolved.reasoning_effort_budgets;
    // Structured outputs compile against the logits' vocabulary; a complete constraint lets EOS
    // through (each request's own stop tokens replace it).
    std::vector<std::int32_t> eos;
    if (resolved.eos_token_id) eos.push_back(*resolved.eos_token_id);
    model.constraints = std::make_shared<structured::ConstraintCompiler>(
        *tokenizer, engine->vocab_size(), std::move(eos));
    if (cmd.enable_auto_tool_choice) {
      PAGODA_ASSIGN_OR_RETURN(model.tool_call_parser,
                              tools::make_tool_call_format(cmd.tool_call_parser));
    }
    // Bare lines, so scripts can grep '^startup:' and '^cuda graphs:'.
    std::fprintf(stderr, "%s\n", startup.summary().c_str());
    if (!startup.weights.empty()) std::fprintf(stderr, "weights: %s\n", startup.weights.c_str());
    if (startup.graphs) std::fprintf(stderr, "%s\n", startup.graphs_summary().c_str());
    // With KV groups a block is a page of one group's layers, which every group draws from.
    const std::size_t num_sliding = resolved.cache.sliding_windows.size();
    const std::string groups =
        num_sliding == 0 ? std::string()
                         : fmt::format(", KV groups: 1 full + {} sliding (window {})", num_sliding,
                                       resolved.cache.sliding_windows.front());
    spdlog::info(
        "model ready in {:.1f}s on {}: {} KV blocks of {} tokens ({} tokens, sized by {}), "
        "max_model_len {}, max_num_seqs {}{}",
        seconds_since(start), cmd.device.label(executor.device), resolved.cache.num_blocks,
        resolved.cache.block_size, resolved.cache.num_blocks * resolved.cache.block_size,
        kv_sizing_rule(cmd, executor), resolved.scheduler.max_model_len,
        resolved.scheduler.max_num_seqs, groups);
    service = std::make_shared<server::OpenAiService>(std::move(model), *engine);
    return Status::ok_status();
  }
};

// The gRPC server where it is built; a stand-in with nothing to do where it is not.
#if PAGODA_HAVE_GRPC
using GrpcServerHandle = grpc::GrpcServer;
std::int64_t grpc_num_active_calls(GrpcServerHandle* s) {
  return s ? s->num_active_calls() : 0;
}
void grpc_begin_drain(GrpcServerHandle* s) {
  if (s) s->begin_drain();
}
// Streams the engine has just ended get a few seconds to send their last message.
void grpc_stop(GrpcServerHandle* s) {
  if (s) s->stop(std::chrono::seconds(5));
}
#else
struct GrpcServerHandle {};
std::int64_t grpc_num_active_calls(GrpcServerHandle*) {
  return 0;
}
void grpc_begin_drain(GrpcServerHandle*) {}
void grpc_stop(GrpcServerHandle*) {}
#endif

// SIGTERM or SIGINT taken by a thread that does not block them: the threads a library starts
// before main blocks them (OpenBLAS's pool does) would otherwise let the kernel deliver one
// there with its default action, killing the server mid-drain. The handler only records it.
std::atomic<int> g_caught_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler stores to it");
void note_caught_signal(int signal) {
  g_caught_signal.store(signal, std::memory_order_relaxed);
}

// Handles SIGTERM and SIGINT with note_caught_signal, then blocks them in this thread and in every
// thread it starts, for wait_for_signal.
void take_over_stop_signals(const sigset_t& signals) {
  struct sigaction action {};
  action.sa_handler = note_caught_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

// Waits up to `timeout` for SIGTERM or SIGINT; the signal or 0. Blocked where the server starts
// threads, they come through sigtimedwait, or through the handler in a thread started before.
int wait_for_signal(const sigset_t& signals, std::chrono::milliseconds timeout) {
  timespec wait{.tv_sec = static_cast<time_t>(timeout.count() / 1000),
                .tv_nsec = static_cast<long>(timeout.count() % 1000) * 1'000'000};
  const int signal = sigtimedwait(&signals, nullptr, &wait);
  if (signal > 0) return signal;
  return g_caught_signal.exchange(0, std::memory_order_relaxed);
}

// Stop accepting, let accepted requests finish within the grace period, abort the rest (their
// clients still get a final event or body), close everything. A second signal cuts it short.
// `grpc_server` (may be null) drains beside HTTP and stops before the engine does.
void drain(server::HttpServer& server, GrpcServerHandle* grpc_server, engine::EngineClient* engine,
           const sigset_t& signals, std::chrono::milliseconds grace) {
  server.begin_drain();
  const auto grpc_calls = [grpc_server] { return grpc_num_active_calls(grpc_server); };
  grpc_begin_drain(grpc_server);
  const auto deadline = Clock::now() + grace;
  while ((server.num_active_requests() > 0 || grpc_calls() > 0) && Clock::now() < deadline) {
    if (wait_for_signal(signals, std::chrono::milliseconds(50)) != 0) {
      spdlog::warn("second signal: aborting the requests in flight");
      break;
    }
  }
  if ((server.num_active_requests() > 0 || grpc_calls() > 0) && engine != nullptr) {
    spdlog::warn("aborting {} requests still in flight",
                 server.num_active_requests() + grpc_calls());
    engine->shutdown(/*drain=*/false);
    server.wait_until_idle(std::chrono::seconds(5));
  }
  grpc_stop(grpc_server);
  server.stop();
  if (engine != nullptr) engine->shutdown(/*drain=*/false);
}

}  // namespace

CLI::App* ServeCommand::add_to(CLI::App& parent) {
  app = parent.add_subcommand("serve", "Serve the OpenAI-compatible HTTP API (GPU or CPU)");
  CLI::App* sub = app;
  sub->add_option("model", model,
                  "A .gguf file or a Hugging Face model folder (default model); with "
                  "--load-format dummy also a config.json file");
  sub->add_option("--config", config_path,
                  "YAML file of flags (max-num-seqs: 8 or max_num_seqs: 8); flags override it");
  sub->add_option("--host", host, "Address to listen on")->capture_default_str();
  sub->add_option("--port", port, "Port to listen on (0: any free port)")->capture_default_str();
#if PAGODA_HAVE_GRPC
  sub->add_option("--grpc-port", grpc_port, "Port of the gRPC API (0: no gRPC server)")
      ->capture_default_str();
#endif
  sub->add_option("--served-model-name", served_model_names,
                  "Names clients use in `model` (default: MODEL as given)");
  sub->add_option("--api-key", api_key,
                  "Require 'Authorization: Bearer KEY' on /v1 endpoints (default: $PAGODA_API_KEY)")
      ->envname("PAGODA_API_KEY");
  sub->add_option("--chat-template", chat_template_path,
                  "A Jinja chat template file to use instead of the model's");
  sub->add_option("--max-model-len", max_model_len,
                  "Longest prompt + completion in tokens (default: the model's context length)");
  sub->add_option("--max-num-seqs", max_num_seqs, "Most requests running at once")
      ->capture_default_str();
  sub->add_flag("--async-scheduling", async_scheduling,
                "Plan and launch each step while the previous one runs (overlapped steps)");
  sub->add_option("--step-time-target-ms", step_time_target_ms, cli::kStepTimeTargetHelp);
  sub->add_option("--max-num-batched-tokens", max_num_batched_tokens,
                  "Token budget of one engine step")
      ->capture_default_str();
  sub->add_option("--max-waiting-requests", max_waiting_requests,
                  "Requests queued beyond --max-num-seqs before new ones get 429")
      ->capture_default_str();
  sub->add_option("--block-size", block_size, "KV cache block size in tokens")
      ->capture_default_str();
  sub->add_option("--kv-cache-memory", kv_cache_memory,
                  "Bytes for the KV cache (default on cuda: what --gpu-memory-utilization leaves; "
                  "on cpu: enough for max-num-seqs full sequences, capped at 4 GiB or a quarter "
                  "of memory)");
  sub->add_flag("--disable-hybrid-kv-cache-manager", disable_hybrid_kv_cache_manager,
                "One KV block table for every layer, also for a model with sliding-window "
                "layers (which otherwise keep only their window's blocks)");
  sub->add_option("--threads", threads, "Threads for the model (default: all cores)");
  sub->add_option("--seed", seed,
                  "Seed of the draws of requests that bring none (default: random at start)");
  sub->add_option("--http-threads", http_threads, "Threads for HTTP connections")
      ->capture_default_str();
  sub->add_option("--max-request-body-bytes", max_request_body_bytes,
                  "Largest request body; larger gets 413")
      ->capture_default_str();
  sub->add_option("--http-header-timeout", header_timeout_seconds,
                  "Seconds a client has to send a request's header (slow clients get 408)")
      ->capture_default_str();
  sub->add_option("--http-keep-alive-timeout", idle_timeout_seconds,
                  "Seconds an idle keep-alive connection stays open")
      ->capture_default_str();
  sub->add_option("--shutdown-grace-seconds", shutdown_grace_seconds,
                  "On SIGTERM/SIGINT, how long requests in flight may take to finish")
      ->capture_default_str();
  sub->add_flag("--disable-log-requests", disable_log_requests, "No log line per finished request");
  sub->add_flag("--enable-auto-tool-choice", enable_auto_tool_choice,
                "tool_choice \"auto\": read tool calls out of the model's output "
                "(needs --tool-call-parser)");
  sub->add_option("--tool-call-parser", tool_call_parser,
                  "How the model writes tool calls: hermes (Hermes, Qwen 2.5 / 3), llama3_json, "
                  "mistral");
  device.add_to(*sub);
  load.add_to(*sub);
  quantization.add_to(*sub);
  trace.add_to(*sub);
  reasoning.add_to(*sub);
  speculative.add_to(*sub);
  // Keep this last: every option registered above becomes settable as PAGODA_<FLAG_NAME> (and
  // MODEL as PAGODA_MODEL), with the command line > environment > --config > default.
  add_env_names(*sub, "PAGODA_");
  return sub;
}

int ServeCommand::run(const char* argv0) {
  if (!config_path.empty()) {
    if (Status s = apply_config_file(config_path, *app); !s.ok()) return report_error(s);
  }
  if (max_num_seqs < 1) return report_error(invalid_argument("--max-num-seqs must be at least 1"));
  if (enable_auto_tool_choice != !tool_call_parser.empty()) {
    return report_error(invalid_argument(
        "--enable-auto-tool-choice and --tool-call-parser go together (as in vLLM)"));
  }
  if (!tool_call_parser.empty()) {
    if (auto parser = tools::make_tool_call_format(tool_call_parser); !parser.ok()) {
      return report_error(parser.status());
    }
  }
  if (max_num_batched_tokens < 1) {
    return report_error(invalid_argument("--max-num-batched-tokens must be at least 1"));
  }
  if (max_waiting_requests < 0) {
    return report_error(invalid_argument("--max-waiting-requests must not be negative"));
  }
  if (block_size < 1) return report_error(invalid_argument("--block-size must be at least 1"));
  if (max_model_len < 0) return report_error(invalid_argument("--max-model-len must be >= 0"));
  if (!(header_timeout_seconds > 0) || !(idle_timeout_seconds > 0)) {
    return report_error(invalid_argument("HTTP timeouts must be positive"));
  }
  if (!(shutdown_grace_seconds >= 0)) {
    return report_error(invalid_argument("--shutdown-grace-seconds must not be negative"));
  }
  // The device is settled before listening, so `--device cuda` on a host without a GPU fails at
  // once rather than after /health has answered.
  engine::ExecutorOptions executor{.num_threads = threads};
  if (Status s = device.apply(quantization, executor); !s.ok()) return report_error(s);
  if (Status s = load.apply(executor); !s.ok()) return report_error(s);
  if (!load.tokenizer.empty() && !std::filesystem::exists(load.tokenizer)) {
    return report_error(not_found("--tokenizer " + load.tokenizer + ": no such file or folder"));
  }
  auto path = resolve_model_path(model, argv0);
  if (!path.ok()) return report_error(path.status());
  std::error_code ec;
  if (!std::filesystem::exists(*path, ec)) {
    return report_error(not_found(*path + ": no such file or folder"));
  }

  server::ServerConfig config{.host = host,
                              .port = port,
                              .num_threads = http_threads,
                              .api_key = api_key,
                              .max_body_bytes = max_request_body_bytes,
                              .header_timeout = milliseconds(header_timeout_seconds),
                              .idle_timeout = milliseconds(idle_timeout_seconds),
                              .shutdown_grace = milliseconds(shutdown_grace_seconds),
                              .log_requests = !disable_log_requests};
  if (Status s = config.validate(); !s.ok()) return report_error(s);

  spdlog::set_default_logger(spdlog::stderr_color_mt("pagoda"));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  // Every thread started from here on inherits the mask; sigtimedwait (or, in a thread started
  // before, the handler) sees the signals.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  take_over_stop_signals(signals);
  raise_open_file_limit();

  // Declared first so it is destroyed last: the server's connections reference the engine.
  ModelLoader loader;
  server::HttpServer server(config);
  if (Status s = server.start(); !s.ok()) return report_error(s);
  spdlog::info("listening on http://{}:{} (/health answers 503 until the model is loaded)", host,
               server.port());
  std::unique_ptr<GrpcServerHandle> grpc_server;
#if PAGODA_HAVE_GRPC
  if (grpc_port != 0) {
    grpc_server = std::make_unique<grpc::GrpcServer>(
        grpc::GrpcServerConfig{.host = host,
                               .port = grpc_port,
                               .api_key = api_key,
                               .max_receive_message_bytes = max_request_body_bytes});
    if (Status s = grpc_server->start(); !s.ok()) return report_error(s);
    spdlog::info("listening for gRPC on {}:{} (UNAVAILABLE until the model is loaded)", host,
                 grpc_server->port());
  }
#endif

  const auto load_start = Clock::now();
  std::thread loading([&] { loader.load(*this, *path, executor); });
  auto next_progress = load_start + std::chrono::seconds(2);
  int signal = 0;
  while (!loader.done.load() && signal == 0) {
    signal = wait_for_signal(signals, std::chrono::milliseconds(100));
    if (Clock::now() >= next_progress && !loader.done.load()) {
      spdlog::info("still loading ({:.0f}s)", seconds_since(load_start));
      next_progress += std::chrono::seconds(2);
    }
  }
  // Loading cannot be interrupted half-way; a signal during it stops the server right after.
  loading.join();
  if (!loader.status.ok()) {
    grpc_stop(grpc_server.get());
    server.stop();
    return report_error(loader.status);
  }
  if (signal == 0) {
    server.set_service(loader.service);
#if PAGODA_HAVE_GRPC
    if (grpc_server) {
      // The aliasing pointer keeps the service, which owns the served model, alive.
      grpc_server->set_backend({.model = std::shared_ptr<const api::ServedModel>(
                                    loader.service, &loader.service->served_model()),
                                .engine = loader.engine.get(),
                                .architecture = loader.architecture,
                                .metrics = loader.service->serving_metrics()});
    }
#endif
    spdlog::info("ready: serving '{}' on http://{}:{}", loader.service->served_model().name(), host,
                 server.port());
    while (signal == 0) signal = wait_for_signal(signals, std::chrono::seconds(1));
  }
  spdlog::info("{}: stopping; requests in flight have {:g}s to finish",
               signal == SIGINT ? "SIGINT" : "SIGTERM", shutdown_grace_seconds);
  drain(server, grpc_server.get(), loader.engine.get(), signals, config.shutdown_grace);
  spdlog::info("stopped");
  return 0;
}

}  // namespace pagoda::cli
