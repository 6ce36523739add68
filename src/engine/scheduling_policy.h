// Who goes first. The policy orders both queues: waiting requests are admitted in policy order,
// running requests are kept in policy order, and the preemption victim is the LAST running
// request (lowest priority, newest). Since each step serves running requests from the front,
// the requests already scheduled in a step always precede any victim, so a victim is never one
// whose tokens were handed out in the same step.
#pragma once

#include <cstdint>
#include <string_view>

#include "engine/request.h"
#include "pagoda/status.h"

namespace pagoda::engine {

/// Admission and preemption order (vLLM's --scheduling-policy).
enum class SchedulingPolicy : std::uint8_t {
  kFcfs,      ///< First come, first served; a preempted request goes back to the queue's front.
  kPriority,  ///< Smaller `priority` first, then earlier arrival.
};

/// Parses "fcfs" or "priority"; INVALID_ARGUMENT listing both otherwise.
Status parse_scheduling_policy(std::string_view text, SchedulingPolicy& policy);

/// "fcfs" or "priority".
std::string_view scheduling_policy_name(SchedulingPolicy policy);

/// Under kPriority, whether `a` is served before `b`: (priority, arrival_time, arrival_seq).
/// kFcfs has no per-request order beyond queue position.
bool runs_before(const Request& a, const Request& b);

}  // namespace pagoda::engine
