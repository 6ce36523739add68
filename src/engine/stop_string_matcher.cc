#include "engine/stop_string_matcher.h"

#include <deque>
#include <utility>

#include "common/check.h"
#include "tokenizer/utf8.h"

namespace pagoda::engine {

Status StopStringMatcher::validate(std::span<const std::string> stop_strings) {
  if (stop_strings.size() > kMaxStopStrings) {
    return invalid_argument("'stop' has " + std::to_string(stop_strings.size()) +
                            " strings; at most " + std::to_string(kMaxStopStrings) +
                            " are allowed");
  }
  for (std::size_t i = 0; i < stop_strings.size(); ++i) {
    const std::string& s = stop_strings[i];
    const std::string name = "'stop[" + std::to_string(i) + "]'";
    if (s.empty()) return invalid_argument(name + " is empty; remove it or give it text");
    if (s.size() > kMaxStopStringBytes) {
      return invalid_argument(name + " is " + std::to_string(s.size()) + " bytes; at most " +
                              std::to_string(kMaxStopStringBytes) + " are allowed");
    }
    if (!is_valid_utf8(s)) return invalid_argument(name + " is not valid UTF-8");
  }
  return Status::ok_status();
}

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings,
                                     bool include_stop_str_in_output)
    : stop_strings_(std::move(stop_strings)),
      include_stop_str_in_output_(include_stop_str_in_output) {
  const Status status = validate(stop_strings_);
  PAGODA_CHECK(status.ok()) << status.to_string();
  build();
}

std::int32_t StopStringMatcher::child(std::int32_t node, unsigned char byte) const {
  for (const auto& [b, next] : nodes_[node].next) {
    if (b == byte) return next;
  }
  return kNone;
}

std::int32_t StopStringMatcher::step(std::int32_t state, unsigned char byte) const {
  while (true) {
    const std::int32_t next = child(state, byte);
    if (next != kNone) return next;
    if (state == kRoot) return kRoot;
    state = nodes_[state].fail;
  }
}

void StopStringMatcher::build() {
  nodes_.assign(1, Node{});
  for (std::size_t i = 0; i < stop_strings_.size(); ++i) {
    std::int32_t node = kRoot;
    for (const char c : stop_strings_[i]) {
      const auto byte = static_cast<unsigned char>(c);
      std::int32_t next = child(node, byte);
      if (next == kNone) {
        next = static_cast<std::int32_t>(nodes_.size());
        Node fresh;
        fresh.depth = nodes_[node].depth + 1;
        nodes_[node].next.emplace_back(byte, next);
        nodes_.push_back(std::move(fresh));
      }
      node = next;
    }
    // A duplicate keeps the first index, so stop_reason names the caller's first spelling.
    if (nodes_[node].match == kNone) nodes_[node].match = static_cast<std::int32_t>(i);
  }
  // Breadth first, so a node's fail target (shallower) is complete before the node itself.
  std::deque<std::int32_t> queue = {kRoot};
  while (!queue.empty()) {
    const std::int32_t u = queue.front();
    queue.pop_front();
    Node& node = nodes_[u];
    if (u != kRoot) {
      // Own string first: it is longer than any suffix's.
      if (node.match == kNone) node.match = nodes_[node.fail].match;
      node.hold = node.next.empty() ? nodes_[node.fail].hold : node.depth;
    }
    for (const auto& [byte, v] : nodes_[u].next) {
      nodes_[v].fail = u == kRoot ? kRoot : step(nodes_[u].fail, byte);
      queue.push_back(v);
    }
  }
}

StopStringMatcher::Result StopStringMatcher::feed(std::string_view text, bool detect) {
  PAGODA_CHECK(!matched_) << "feed() after a stop string matched";
  Result result;
  const std::size_t start = pending_.size();
  pending_.append(text);
  for (std::size_t i = start; i < pending_.size(); ++i) {
    state_ = step(state_, static_cast<unsigned char>(pending_[i]));
    const std::int32_t m = nodes_[state_].match;
    if (!detect || m == kNone) continue;
    matched_ = true;
    result.matched = static_cast<std::size_t>(m);
    const std::size_t end = i + 1;
    const std::size_t length = stop_strings_[m].size();
    // The match began inside the held-back tail or the new text, never in released text.
    PAGODA_CHECK(include_stop_str_in_output_ || length <= end)
        << "stop string began in text already released";
    result.released = pending_.substr(0, include_stop_str_in_output_ ? end : end - length);
    pending_.clear();
    return result;
  }
  const std::size_t hold =
      include_stop_str_in_output_ ? 0 : static_cast<std::size_t>(nodes_[state_].hold);
  PAGODA_CHECK_LE(hold, pending_.size()) << "held-back text was already released";
  result.released = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return result;
}

std::string StopStringMatcher::flush() {
  state_ = kRoot;
  return std::exchange(pending_, std::string());
}

}  // namespace pagoda::engine
