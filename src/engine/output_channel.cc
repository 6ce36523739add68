#include "engine/output_channel.h"

#include <utility>

#include "common/check.h"

namespace pagoda::engine {

void merge_stream_output(StreamOutput& into, StreamOutput&& next) {
  PAGODA_CHECK_EQ(into.index, next.index);
  PAGODA_CHECK(!into.output.finished) << "nothing follows a final output";
  RequestOutput& a = into.output;
  RequestOutput& b = next.output;
  a.text += b.text;
  a.reasoning_text += b.reasoning_text;
  a.token_ids.insert(a.token_ids.end(), b.token_ids.begin(), b.token_ids.end());
  a.logprobs.insert(a.logprobs.end(), std::make_move_iterator(b.logprobs.begin()),
                    std::make_move_iterator(b.logprobs.end()));
  a.prompt_logprobs.insert(a.prompt_logprobs.end(),
                           std::make_move_iterator(b.prompt_logprobs.begin()),
                           std::make_move_iterator(b.prompt_logprobs.end()));
  a.finished = b.finished;
  a.status = b.status;
  a.stop_token_id = b.stop_token_id;
  a.stop_string = std::move(b.stop_string);
  a.usage = b.usage;
  a.timings = std::move(b.timings);
  into.error = std::move(next.error);
}

OutputChannel::OutputChannel(std::size_t capacity, std::int64_t num_samples,
                             std::function<void()> on_final)
    : capacity_(capacity), on_final_(std::move(on_final)), finals_left_(num_samples) {
  PAGODA_CHECK(capacity_ >= 1 && num_samples >= 1) << capacity_ << ", " << num_samples;
}

void OutputChannel::push(StreamOutput item) {
  if (item.output.finished && on_final_) on_final_();
  std::shared_ptr<const std::function<void()>> listener;
  bool merged = false;
  {
    std::lock_guard lock(mutex_);
    listener = listener_;
    if (queue_.size() >= capacity_) {
      // Newest queued output of the same sample; with n > 1 there may be none, and then the
      // queue grows past capacity by at most one output per sample.
      for (auto it = queue_.rbegin(); it != queue_.rend(); ++it) {
        if (it->index == item.index && !it->output.finished) {
          merge_stream_output(*it, std::move(item));
          ++num_coalesced_;
          merged = true;
          break;
        }
      }
    }
    if (!merged) queue_.push_back(std::move(item));
  }
  if (!merged) ready_.notify_all();
  if (listener) (*listener)();
}

void OutputChannel::set_listener(std::function<void()> listener) {
  std::shared_ptr<const std::function<void()>> installed;
  if (listener) installed = std::make_shared<const std::function<void()>>(std::move(listener));
  bool pending = false;
  {
    std::lock_guard lock(mutex_);
    listener_ = installed;
    pending = !queue_.empty() || finals_left_ == 0;
  }
  // Outputs pushed before the listener was installed would otherwise wait for the next push,
  // which may never come.
  if (installed && pending) (*installed)();
}

StreamOutput OutputChannel::take_front() {
  StreamOutput item = std::move(queue_.front());
  queue_.pop_front();
  if (item.output.finished) --finals_left_;
  return item;
}

std::optional<StreamOutput> OutputChannel::pop(
    std::optional<std::chrono::steady_clock::time_point> deadline) {
  std::unique_lock lock(mutex_);
  const auto ready = [this] { return !queue_.empty() || finals_left_ == 0; };
  if (deadline) {
    if (!ready_.wait_until(lock, *deadline, ready)) return std::nullopt;
  } else {
    ready_.wait(lock, ready);
  }
  if (queue_.empty()) return std::nullopt;
  return take_front();
}

std::optional<StreamOutput> OutputChannel::try_pop() {
  std::lock_guard lock(mutex_);
  if (queue_.empty()) return std::nullopt;
  return take_front();
}

bool OutputChannel::ended() const {
  std::lock_guard lock(mutex_);
  return finals_left_ == 0 && queue_.empty();
}

std::int64_t OutputChannel::num_coalesced() const {
  std::lock_guard lock(mutex_);
  return num_coalesced_;
}

}  // namespace pagoda::engine
