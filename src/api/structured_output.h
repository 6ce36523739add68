// The structured-output fields of a chat or completion request, as OpenAI and vLLM spell them,
// turned into one compiled constraint on the engine request:
//
//   response_format {"type": "json_object"}                         -> any JSON object
//   response_format {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}
//   structured_outputs {"json" | "regex" | "choice" | "grammar" | "json_object": true}  (vLLM)
//   guided_json, guided_regex, guided_choice, guided_grammar         (vLLM's older names)
//
// At most one may be given. The schema, regex or grammar is compiled here, on the request's
// thread (cached per spec, bounded in time and size: src/structured/constraint_compiler.h), so
// a bad one is a 400 naming the parameter and the problem before the engine sees the request.
#pragma once

#include <optional>
#include <string>

#include "api/api_error.h"
#include "api/request_fields.h"
#include "api/served_model.h"
#include "engine/engine_client.h"
#include "structured/constraint_spec.h"

namespace pagoda::api {

/// A constraint the request asks for, and the parameter it came from (for error messages).
struct StructuredOutputRequest {
  structured::ConstraintSpec spec;
  std::string param;
};

/// Reads the fields above; nothing when none is given. Errors go to `fields`.
std::optional<StructuredOutputRequest> read_structured_output(RequestFields& fields);

/// Compiles `request` with the model's compiler into `engine_request.constraint`. A 400 naming
/// the parameter for a bad spec or one the request cannot end (ignore_eos without
/// stop_token_ids); 503 while the compiler is saturated.
std::optional<ApiError> compile_structured_output(const StructuredOutputRequest& request,
                                                  const ServedModel& model,
                                                  engine::EngineRequest& engine_request);

}  // namespace pagoda::api
