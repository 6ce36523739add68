// Fills the step's allowed-token masks on a thread of its own while the executor runs the
// forward pass, so structured outputs add no host time to a step when the masks are ready
// before the logits (the executor waits for them right before it samples):
//
//   engine thread   prepare: rows, mask slots | start ---- run(): forward ---- wait | sample
//   filler thread                             | fill mask 0, 1, ... done  ------^
//
// The engine hands over each constrained request's matcher and its mask's words; nothing else
// touches them until wait() returns. A step without constrained requests never wakes it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "engine/request_constraint.h"
#include "pagoda/status.h"
#include "pagoda/step_sampling.h"

namespace pagoda::engine {

class ConstraintMaskFiller final : public PendingMasks {
 public:
  /// One mask to fill: the constraint's next-token mask into `words`; `failure` is set when it
  /// allows no token.
  struct Job {
    RequestConstraint* constraint = nullptr;
    std::span<std::uint32_t> words;
    std::optional<Status>* failure = nullptr;
  };

  ConstraintMaskFiller();
  ~ConstraintMaskFiller() override;

  /// Starts filling `jobs` (the previous batch must have been waited for).
  void start(std::vector<Job> jobs);
  /// Blocks until the started jobs are done; returns at once when none are pending.
  void wait() override;
  /// Seconds spent filling, summed over all jobs; seconds wait() blocked (what the step paid);
  /// masks filled. Read on the engine thread after wait().
  double fill_seconds() const { return fill_seconds_; }
  double wait_seconds() const { return wait_seconds_; }
  std::int64_t num_filled() const { return num_filled_; }

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Job> jobs_;
  bool busy_ = false;  // jobs_ handed over and not done
  bool stop_ = false;
  double fill_seconds_ = 0.0;  // written by the filler thread while busy_, read after wait()
  std::int64_t num_filled_ = 0;
  double wait_seconds_ = 0.0;  // engine thread only
  std::thread thread_;
};

}  // namespace pagoda::engine
