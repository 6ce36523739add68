#include "grpc/request_registry.h"

namespace pagoda::grpc {

bool RequestRegistry::add(const std::string& request_id) {
  std::lock_guard lock(mutex_);
  return ids_.emplace(request_id, nullptr).second;
}

void RequestRegistry::remove(const std::string& request_id) {
  bool empty = false;
  {
    std::lock_guard lock(mutex_);
    ids_.erase(request_id);
    empty = ids_.empty();
  }
  if (empty) emptied_.notify_all();
}

bool RequestRegistry::contains(const std::string& request_id) const {
  std::lock_guard lock(mutex_);
  return ids_.contains(request_id);
}

void RequestRegistry::set_abort_hook(const std::string& request_id, std::function<void()> hook) {
  std::lock_guard lock(mutex_);
  if (const auto it = ids_.find(request_id); it != ids_.end()) it->second = std::move(hook);
}

std::function<void()> RequestRegistry::abort_hook(const std::string& request_id) const {
  std::lock_guard lock(mutex_);
  const auto it = ids_.find(request_id);
  return it == ids_.end() ? nullptr : it->second;
}

std::size_t RequestRegistry::size() const {
  std::lock_guard lock(mutex_);
  return ids_.size();
}

bool RequestRegistry::wait_until_empty(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return emptied_.wait_for(lock, timeout, [this] { return ids_.empty(); });
}

}  // namespace pagoda::grpc
