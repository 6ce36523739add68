// libFuzzer target for the OpenAI request validators, the path every HTTP and gRPC body takes:
// any bytes must parse into a body or an error, and any body must validate as a chat and as a
// completion request into an engine request or an OpenAI-shaped error (messages rendered with
// the default model's chat template and tokenized), never crash or hang. Built by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "api/chat_request.h"
#include "api/completion_request.h"
#include "api/request_body.h"
#include "fuzz_served_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pagoda;
  const api::ServedModel& model = fuzz::served_model();
  auto body = api::parse_request_body(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!body.ok()) return 0;
  // Past the model check, which a fuzzer would rarely get by by chance.
  if (body->is_object()) (*body)["model"] = "m";
  for (const bool chat : {true, false}) {
    auto job =
        chat ? api::parse_chat_request(*body, model) : api::parse_completion_request(*body, model);
    // An error is a client's: 4xx, never a 5xx for a body the validator could read.
    if (!job.ok() && job.error().http_status >= 500) std::abort();
  }
  return 0;
}
