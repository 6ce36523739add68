// One Generate call in flight: compiles its structured-output constraint (when it has one) off
// gRPC's threads, submits it, streams its engine outputs to the client without a thread of its
// own, and aborts the request in the engine when the client cancels, its deadline passes or the
// connection drops, so its KV blocks are freed within one engine step.
//
//   compiler thread:  compiled ──> executor.post(submit)  (cancelled first: nothing submitted)
//   engine thread:    channel.push ──listener──> executor.post(pump)      (never calls gRPC)
//   executor thread:  pump: try_next ──> StartWrite          (one write in flight at a time)
//   gRPC thread:      OnWriteDone ──> pump ...   last output ──> StartWriteAndFinish
//                     OnCancel ──> EngineClient::abort, then Finish(CANCELLED)
//                     OnDone ──> released once the engine has sent the final output too
//
// The request id stays in the registry until both gRPC and the engine are done with it, so a
// new call cannot reuse the id of a request the engine is still aborting.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "api/generation_job.h"
#include "api/served_model.h"
#include "engine/engine_client.h"
#include "grpc/inference_backend.h"
#include "grpc/request_registry.h"
#include "grpc/serial_executor.h"
#include "grpc/tool_call_response.h"
#include "pagoda/v1/generate.pb.h"
#include "structured/constraint_compiler.h"

namespace pagoda::grpc {

/// The server side of one Generate stream. Owns itself until it is released (see above).
class GenerateReactor final : public ::grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  /// Compiles `job`'s constraint when it has one, then submits its one request, whose id is
  /// already in `registry`, to `backend`'s engine (which must outlive the reactor) and streams
  /// it; the final output is counted in its metrics. A failed compile or submit finishes the
  /// call with its status.
  static GenerateReactor* start(api::GenerationJob job, const InferenceBackend& backend,
                                std::shared_ptr<SerialExecutor> executor,
                                std::shared_ptr<RequestRegistry> registry);
  ~GenerateReactor() override;

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  GenerateReactor(std::string request_id, std::int64_t num_samples,
                  const api::ResponseOptions& options, const InferenceBackend& backend,
                  std::shared_ptr<SerialExecutor> executor,
                  std::shared_ptr<RequestRegistry> registry);

  // Executor thread: the compile's result. Submits unless the call has ended meanwhile.
  void on_compiled(structured::CompileResult compiled);
  // Submits the job's request and starts streaming it, or finishes the call with the refusal.
  void submit(api::GenerationJob job);
  // Finishes a call that never reached the engine (its id leaves the registry at once).
  void refuse(const api::ApiError& error);
  // Abort by request_id before the request reached the engine: each of the n samples gets one
  // message saying FINISH_REASON_ABORT (as when the engine aborts them), and the request is
  // never submitted.
  void abort_before_submit();
  // Leaves the registry and starts writing those messages; called with the lock held, which it
  // lets go.
  void finish_aborted(std::unique_lock<std::mutex>& lock);
  // Writes the next sample's abort message (the last one finishes the call); called with the
  // lock held, which it lets go.
  void write_abort_message(std::unique_lock<std::mutex>& lock);
  // Engine thread: hands a pump to the executor, at most one queued at a time.
  void wake();
  // Starts the next write if none is in flight and an output is ready; finishes the call after
  // the last output or once cancelled; after OnDone, discards outputs until the final one.
  void pump();
  void abort_in_engine();
  // The next output of the stream, counting the final one in the metrics.
  std::optional<engine::StreamOutput> next_output();

  const std::string request_id_;
  const std::int64_t num_samples_;  // n: each sample ends with its own final message
  const std::shared_ptr<const api::ServedModel> model_;
  engine::EngineClient& engine_;
  const std::shared_ptr<api::ServingMetrics> metrics_;
  const std::shared_ptr<SerialExecutor> executor_;
  const std::shared_ptr<RequestRegistry> registry_;
  std::atomic<bool> wake_posted_{false};

  std::mutex mutex_;  // guards everything below
  // Null until submitted (while the constraint compiles), and for a call refused before.
  std::shared_ptr<engine::OutputStream> stream_;
  std::optional<api::GenerationJob> compiling_job_;
  structured::CompileTicket compile_ticket_;
  bool writing_ = false;
  bool cancelled_ = false;
  bool abort_requested_ = false;  // Abort came for this id (before the engine had the request)
  std::int64_t abort_messages_sent_ = -1;  // -1 until aborted before submit; then 0 .. n
  bool finished_ = false;          // ending: Finish called, or (aborted) its messages being written
  bool grpc_done_ = false;         // OnDone has been called
  v1::GenerateResponse response_;  // the message being written
  ToolCallResponse tool_calls_;
  // Keeps the reactor alive until released; pumps posted earlier hold weak references.
  std::shared_ptr<GenerateReactor> self_;
};

/// A Generate call refused before it started: finishes with `status` at once.
class RefusedGenerate final : public ::grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  explicit RefusedGenerate(const ::grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace pagoda::grpc
