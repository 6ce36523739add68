#include "grpc/generate_reactor.h"

#include <algorithm>
#include <utility>

#include "api/structured_output.h"
#include "grpc/generate_response.h"
#include "grpc/grpc_status.h"

namespace pagoda::grpc {

GenerateReactor* GenerateReactor::start(api::GenerationJob job, const InferenceBackend& backend,
                                        std::shared_ptr<SerialExecutor> executor,
                                        std::shared_ptr<RequestRegistry> registry) {
  std::shared_ptr<GenerateReactor> reactor(
      new GenerateReactor(job.requests.front().request_id, job.requests.front().sampling.n,
                          job.response, backend, std::move(executor), std::move(registry)));
  reactor->self_ = reactor;
  if (!job.constraint) {
    reactor->submit(std::move(job));
    return reactor.get();
  }
  // Abort by request_id may come while the constraint compiles, before the engine knows it.
  reactor->registry_->set_abort_hook(reactor->request_id_,
                                     [weak = std::weak_ptr<GenerateReactor>(reactor)] {
                                       if (std::shared_ptr<GenerateReactor> self = weak.lock())
                                         self->abort_before_submit();
                                     });
  // The compile runs on the compiler's threads; its result comes back through the executor.
  std::lock_guard lock(reactor->mutex_);
  reactor->compiling_job_ = std::move(job);
  reactor->compile_ticket_ = backend.model->constraints->compile_async(
      reactor->compiling_job_->constraint->spec,
      [weak = std::weak_ptr<GenerateReactor>(reactor),
       executor = reactor->executor_](structured::CompileResult compiled) {
        executor->post([weak, compiled = std::move(compiled)]() mutable {
          if (std::shared_ptr<GenerateReactor> self = weak.lock()) {
            self->on_compiled(std::move(compiled));
          }
        });
      });
  return reactor.get();
}

GenerateReactor::GenerateReactor(std::string request_id, std::int64_t num_samples,
                                 const api::ResponseOptions& options,
                                 const InferenceBackend& backend,
                                 std::shared_ptr<SerialExecutor> executor,
                                 std::shared_ptr<RequestRegistry> registry)
    : request_id_(request_id),
      num_samples_(std::max<std::int64_t>(num_samples, 1)),
      model_(backend.model),
      engine_(*backend.engine),
      metrics_(backend.metrics),
      executor_(std::move(executor)),
      registry_(std::move(registry)),
      tool_calls_(options, std::move(request_id)) {}

void GenerateReactor::on_compiled(structured::CompileResult compiled) {
  api::GenerationJob job;
  {
    std::lock_guard lock(mutex_);
    if (finished_ || !compiling_job_) return;  // cancelled while compiling
    job = std::move(*compiling_job_);
    compiling_job_.reset();
    compile_ticket_ = {};
  }
  if (std::optional<api::ApiError> error = api::attach_constraint(job, compiled)) {
    refuse(*error);
    return;
  }
  submit(std::move(job));
}

void GenerateReactor::submit(api::GenerationJob job) {
  std::unique_lock lock(mutex_);
  // Cancelled or aborted meanwhile: nothing reaches the engine. Under the lock, so a cancel or
  // an Abort either comes first or finds the stream to abort.
  if (finished_) return;
  if (abort_requested_) {
    finish_aborted(lock);
    return;
  }
  StatusOr<std::shared_ptr<engine::OutputStream>> submitted =
      engine_.submit(std::move(job.requests.front()));
  if (!submitted.ok()) {
    lock.unlock();
    refuse(api::ApiError::from_status(submitted.status()));
    return;
  }
  stream_ = std::move(*submitted);
  // Writes started before the handler returns are held by gRPC until the call is bound.
  stream_->set_listener([weak = std::weak_ptr<GenerateReactor>(self_)] {
    if (std::shared_ptr<GenerateReactor> self = weak.lock()) self->wake();
  });
  lock.unlock();
  pump();
}

void GenerateReactor::abort_before_submit() {
  std::unique_lock lock(mutex_);
  abort_requested_ = true;
  // In the engine already (Abort aborts it there), ended, or between its compile and submit()
  // (which sees abort_requested_).
  if (finished_ || stream_ || !compiling_job_) return;
  compiling_job_.reset();
  compile_ticket_ = {};
  finish_aborted(lock);
}

void GenerateReactor::finish_aborted(std::unique_lock<std::mutex>& lock) {
  finished_ = true;  // nothing is submitted from now on
  abort_messages_sent_ = 0;
  lock.unlock();
  registry_->remove(request_id_);
  pump();
}

void GenerateReactor::write_abort_message(std::unique_lock<std::mutex>& lock) {
  response_.Clear();
  response_.set_request_id(request_id_);
  response_.set_index(abort_messages_sent_);
  response_.set_finish_reason(v1::FINISH_REASON_ABORT);
  writing_ = true;
  const bool last = ++abort_messages_sent_ == num_samples_;
  lock.unlock();
  if (last) {
    StartWriteAndFinish(&response_, ::grpc::WriteOptions(), ::grpc::Status::OK);
  } else {
    StartWrite(&response_);
  }
}

void GenerateReactor::refuse(const api::ApiError& error) {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    finished_ = true;
    compiling_job_.reset();
    compile_ticket_ = {};
  }
  registry_->remove(request_id_);
  // Counted as HTTP counts a refused generation request (the same status_code label).
  if (metrics_) metrics_->record_rejected(error.http_status);
  Finish(to_grpc_status(error));
}

GenerateReactor::~GenerateReactor() {
  if (stream_) stream_->set_listener(nullptr);
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
    // Aborted before submit: one message per sample, one write at a time; a write that failed
    // (the client went) ends the call instead.
    if (abort_messages_sent_ >= 0 && abort_messages_sent_ < num_samples_ && !writing_ &&
        !grpc_done_) {
      if (!cancelled_) {
        write_abort_message(lock);
        return;
      }
      abort_messages_sent_ = num_samples_;
      lock.unlock();
      Finish(::grpc::Status(::grpc::StatusCode::CANCELLED, "the call was cancelled"));
      return;
    }
    if (!grpc_done_) return;
    if (stream_) {
      // The call is over; the engine still owes the final output of an aborted request.
      while (next_output()) {
      }
      if (!stream_->ended()) return;
    }
    if (self_ == nullptr) return;
    released = std::move(self_);
    // A call that never reached the engine left the registry when it was refused or cancelled.
    const bool submitted = stream_ != nullptr;
    lock.unlock();
    if (submitted) registry_->remove(request_id_);
    return;
  }
  if (writing_) return;
  if (cancelled_) {
    finished_ = true;
    const bool submitted = stream_ != nullptr;
    // Cancelled while compiling: the compile's waiter goes, and nothing is submitted.
    compiling_job_.reset();
    compile_ticket_ = {};
    lock.unlock();
    if (!submitted) registry_->remove(request_id_);
    Finish(::grpc::Status(::grpc::StatusCode::CANCELLED, "the call was cancelled"));
    return;
  }
  if (!stream_) return;  // still compiling
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
  tool_calls_.add(*item, response_);
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
  std::shared_ptr<engine::OutputStream> stream;
  {
    std::lock_guard lock(mutex_);
    stream = stream_;
  }
  if (stream && !stream->ended()) engine_.abort(request_id_);
}

}  // namespace pagoda::grpc
