#include "engine/constraint_mask_filler.h"

#include <chrono>

namespace pagoda::engine {

ConstraintMaskFiller::ConstraintMaskFiller() : thread_([this] { run(); }) {}

ConstraintMaskFiller::~ConstraintMaskFiller() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void ConstraintMaskFiller::start(std::vector<Job> jobs) {
  if (jobs.empty()) return;
  {
    std::lock_guard lock(mutex_);
    jobs_ = std::move(jobs);
    busy_ = true;
  }
  changed_.notify_all();
}

void ConstraintMaskFiller::wait() {
  std::unique_lock lock(mutex_);
  if (!busy_) return;
  const auto start = std::chrono::steady_clock::now();
  changed_.wait(lock, [this] { return !busy_; });
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void ConstraintMaskFiller::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [this] { return busy_ || stop_; });
    if (stop_) return;
    std::vector<Job> jobs = std::move(jobs_);
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    for (const Job& job : jobs) {
      if (!job.constraint->fill_mask(job.words)) {
        *job.failure = invalid_argument(
            "the structured output cannot be completed: its constraint allows no next token");
      }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    lock.lock();
    fill_seconds_ += seconds;
    num_filled_ += static_cast<std::int64_t>(jobs.size());
    busy_ = false;
    changed_.notify_all();
  }
}

}  // namespace pagoda::engine
