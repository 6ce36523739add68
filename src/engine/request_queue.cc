#include "engine/request_queue.h"

#include <algorithm>

namespace pagoda::engine {

void RequestQueue::add(Request* request) {
  if (policy_ == SchedulingPolicy::kFcfs) {
    requests_.push_back(request);
  } else {
    insert_sorted(request);
  }
}

void RequestQueue::add_preempted(Request* request) {
  if (policy_ == SchedulingPolicy::kFcfs) {
    requests_.push_front(request);
  } else {
    insert_sorted(request);
  }
}

bool RequestQueue::remove(const Request* request) {
  const auto it = std::find(requests_.begin(), requests_.end(), request);
  if (it == requests_.end()) return false;
  requests_.erase(it);
  return true;
}

void RequestQueue::insert_sorted(Request* request) {
  // upper_bound: among equals, the newcomer goes last.
  const auto it =
      std::upper_bound(requests_.begin(), requests_.end(), request,
                       [](const Request* a, const Request* b) { return runs_before(*a, *b); });
  requests_.insert(it, request);
}

}  // namespace pagoda::engine
