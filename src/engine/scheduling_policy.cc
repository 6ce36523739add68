#include "engine/scheduling_policy.h"

#include <string>
#include <tuple>

namespace pagoda::engine {

Status parse_scheduling_policy(std::string_view text, SchedulingPolicy& policy) {
  if (text == "fcfs") {
    policy = SchedulingPolicy::kFcfs;
  } else if (text == "priority") {
    policy = SchedulingPolicy::kPriority;
  } else {
    return invalid_argument("unknown scheduling policy '" + std::string(text) +
                            "'; use 'fcfs' or 'priority'");
  }
  return Status::ok_status();
}

std::string_view scheduling_policy_name(SchedulingPolicy policy) {
  return policy == SchedulingPolicy::kFcfs ? "fcfs" : "priority";
}

bool runs_before(const Request& a, const Request& b) {
  return std::tuple(a.options().priority, a.options().arrival_time, a.arrival_seq()) <
         std::tuple(b.options().priority, b.options().arrival_time, b.arrival_seq());
}

}  // namespace pagoda::engine
