// A queue of requests in scheduling-policy order, used for both the waiting and the running
// requests. FCFS keeps insertion order; priority keeps (priority, arrival) order by inserting
// at the sorted position. Queues are short (bounded by max_num_seqs for running, by admission
// control for waiting), so a deque with O(n) middle insertion beats a heap that cannot remove an
// aborted request cheaply or iterate in order.
#pragma once

#include <cstddef>
#include <deque>

#include "engine/request.h"
#include "engine/scheduling_policy.h"

namespace pagoda::engine {

/// Requests (not owned) in policy order.
class RequestQueue {
 public:
  /// An empty queue ordered by `policy`.
  explicit RequestQueue(SchedulingPolicy policy) : policy_(policy) {}

  /// Inserts a new arrival: at the back (FCFS) or at its priority position.
  void add(Request* request);
  /// Re-inserts a preempted request: at the FRONT (FCFS, it was admitted before everyone still
  /// waiting) or at its priority position.
  void add_preempted(Request* request);
  /// Removes `request` wherever it is; false when it is not queued.
  bool remove(const Request* request);

  /// First in order.
  Request* front() const { return requests_.front(); }
  /// Last in order: the preemption victim of the running queue.
  Request* back() const { return requests_.back(); }
  /// Drops the first.
  void pop_front() { requests_.pop_front(); }
  /// Drops the last.
  void pop_back() { requests_.pop_back(); }
  /// The i-th in order.
  Request* operator[](std::size_t i) const { return requests_[i]; }

  /// Number queued.
  std::size_t size() const { return requests_.size(); }
  /// Whether none are queued.
  bool empty() const { return requests_.empty(); }
  /// Iteration in order.
  auto begin() const { return requests_.begin(); }
  /// Iteration in order.
  auto end() const { return requests_.end(); }

 private:
  void insert_sorted(Request* request);

  SchedulingPolicy policy_;
  std::deque<Request*> requests_;
};

}  // namespace pagoda::engine
