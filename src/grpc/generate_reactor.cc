#include "grpc/generate_reactor.h"

#include <utility>

#include "grpc/generate_response.h"
#include "grpc/grpc_status.h"

namespace pagoda::grpc {

GenerateReactor* GenerateReactor::start(std::shared_ptr<engine::OutputStream> stream,
                                        const InferenceBackend& backend,
                                        std::shared_ptr<SerialExecutor> executor,
                                        std::shared_ptr<RequestRegistry> registry) {
  std::shared_ptr<GenerateReactor> reactor(
      new GenerateReactor(std::move(stream), backend, std::move(executor), std::move(registry)));
  reactor->self_ = reactor;
  // Writes started before the handler returns are held by gRPC until the call is bound.
  reactor->stream_->set_listener([weak = std::weak_ptr<GenerateReactor>(reactor)] {
    if (std::shared_ptr<GenerateReactor> self = weak.lock()) self->wake();
  });
  return reactor.get();
}

GenerateReactor::GenerateReactor(std::shared_ptr<engine::OutputStream> stream,
                                 const InferenceBackend& backend,
                                 std::shared_ptr<SerialExecutor> executor,
                                 std::shared_ptr<RequestRegistry> registry)
    : stream_(std::move(stream)),
      model_(backend.model),
      engine_(*backend.engine),
      metrics_(backend.metrics),
      executor_(std::move(executor)),
      registry_(std::move(registry)) {}

GenerateReactor::~GenerateReactor() {
  stream_->set_listener(nullptr);
  abort_in_engine();
}

void GenerateReactor::wake() {
  if (wake_posted_.exchange(true)) return;
  executor_->post([weak = std::weak_ptr<GenerateReactor>(self_)] {
    std::shared_ptr<GenerateReactor> self = weak.lock();
    if (!self) return;
    self->wake_posted_.store(false);
    self->pump();
  });
}

void GenerateReactor::pump() {
  std::shared_ptr<GenerateReactor> released;  // destroyed last, after the lock is let go
  std::unique_lock lock(mutex_);
  if (finished_) {
    if (!grpc_done_) return;
    // The call is over; the engine still owes the final output of an aborted request.
    while (next_output()) {
    }
    if (!stream_->ended() || self_ == nullptr) return;
    released = std::move(self_);
    lock.unlock();
    registry_->remove(stream_->request_id());
    return;
  }
  if (writing_) return;
  if (cancelled_) {
    finished_ = true;
    lock.unlock();
    Finish(::grpc::Status(::grpc::StatusCode::CANCELLED, "the call was cancelled"));
    return;
  }
  std::optional<engine::StreamOutput> item = next_output();
  if (!item) return;
  if (!item->error.ok()) {
    // The engine failed the request (or stopped without draining): say so rather than end the
    // stream as if the text were complete.
    finished_ = true;
    lock.unlock();
    abort_in_engine();
    Finish(to_grpc_status(item->error));
    return;
  }
  fill_generate_response(*item, stream_->request_id(), *model_->tokenizer, response_);
  writing_ = true;
  const bool last = stream_->ended();
  if (last) finished_ = true;
  lock.unlock();
  if (last) {
    StartWriteAndFinish(&response_, ::grpc::WriteOptions(), ::grpc::Status::OK);
  } else {
    StartWrite(&response_);
  }
}

void GenerateReactor::OnWriteDone(bool ok) {
  {
    std::lock_guard lock(mutex_);
    writing_ = false;
    // A failed write means the call is broken: client gone, cancelled, deadline passed.
    if (!ok) cancelled_ = true;
  }
  if (!ok) abort_in_engine();
  pump();
}

void GenerateReactor::OnCancel() {
  abort_in_engine();
  {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
  }
  pump();
}

void GenerateReactor::OnDone() {
  {
    std::lock_guard lock(mutex_);
    grpc_done_ = true;
  }
  pump();
}

std::optional<engine::StreamOutput> GenerateReactor::next_output() {
  std::optional<engine::StreamOutput> item = stream_->try_next();
  if (item && item->output.finished && metrics_) metrics_->record_finished(*item);
  return item;
}

void GenerateReactor::abort_in_engine() {
  if (!stream_->ended()) engine_.abort(stream_->request_id());
}

}  // namespace pagoda::grpc
