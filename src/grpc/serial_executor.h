// One thread that runs posted tasks in order. The engine thread hands gRPC work to it, so the
// engine never calls into gRPC (whose writes take locks and may do transport work inline) and
// any number of streams share one thread instead of one each.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace pagoda::grpc {

/// A single-threaded task queue. post() is thread-safe and never waits for a task to run.
/// Callers that may post late (an engine listener racing a server stop) share ownership, so a
/// late post finds a stopped executor, never a destroyed one.
class SerialExecutor {
 public:
  SerialExecutor();
  /// shutdown().
  ~SerialExecutor();
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  /// Queues `task` to run on the executor's thread; dropped after shutdown().
  void post(std::function<void()> task);
  /// Runs the tasks already posted, then joins the thread. Idempotent; not from a task.
  void shutdown();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::mutex join_mutex_;  // one shutdown() joins, a concurrent one waits for it
  std::thread thread_;     // last: starts after the members it uses exist
};

}  // namespace pagoda::grpc
