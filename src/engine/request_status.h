// The request state machine. The enum order means something: a request only ever moves to a
// larger value, except that a preempted request goes back to waiting/running when it resumes.
// Every state from kFinishedStopped on is terminal. See docs/lifecycle.md for the diagram.
#pragma once

#include <cstdint>
#include <string_view>

namespace pagoda::engine {

/// Where a request is in the engine. Terminal states compare >= kFinishedStopped.
enum class RequestStatus : std::uint8_t {
  kWaiting,          ///< Queued, holds no KV blocks.
  kRunning,          ///< Admitted: holds blocks, gets tokens every step it fits the budget.
  kPreempted,        ///< Blocks taken back for others; queued again, will recompute.
  kFinishedStopped,  ///< Sampled EOS or a stop token id.
  kFinishedLength,   ///< Reached max_tokens or max_model_len.
  kFinishedAborted,  ///< Cancelled by the client or the engine.
};

/// Whether `status` is terminal.
constexpr bool is_finished(RequestStatus status) {
  return status >= RequestStatus::kFinishedStopped;
}

/// Short name for logs and traces ("waiting", "finished_length", ...).
std::string_view request_status_name(RequestStatus status);

/// OpenAI finish_reason of a terminal status ("stop", "length", "abort"); empty otherwise.
std::string_view finish_reason(RequestStatus status);

}  // namespace pagoda::engine
