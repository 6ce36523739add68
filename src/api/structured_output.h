// The structured-output fields of a chat or completion request, as OpenAI and vLLM spell them,
// turned into one compiled constraint on the engine request:
//
//   response_format {"type": "json_object"}                         -> any JSON object
//   response_format {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}
//   structured_outputs {"json" | "regex" | "choice" | "grammar" | "json_object": true}  (vLLM)
//   guided_json, guided_regex, guided_choice, guided_grammar         (vLLM's older names)
//
// At most one may be given. The parsers check it can be served and leave it on the job
// (GenerationJob::constraint); the frontends compile it without blocking their threads
// (ConstraintCompiler::compile_async: cached per spec, bounded in time and size) and
// attach_constraint puts the result on the requests, so a bad spec is a 400 naming the
// parameter and the problem before the engine sees the request.
#pragma once

#include <optional>
#include <string>

#include "api/api_error.h"
#include "api/generation_job.h"
#include "api/request_fields.h"
#include "api/served_model.h"
#include "engine/engine_client.h"
#include "structured/constraint_compiler.h"

namespace pagoda::api {

/// Reads the fields above; nothing when none is given. Errors go to `fields`.
std::optional<StructuredOutputRequest> read_structured_output(RequestFields& fields);

/// Whether `model` can serve `request` for `engine_request`: a 400 naming the parameter when
/// the server has no compiler or the request cannot end (ignore_eos without stop_token_ids).
std::optional<ApiError> check_structured_output(const StructuredOutputRequest& request,
                                                const ServedModel& model,
                                                const engine::EngineRequest& engine_request);

/// Puts the compile of `job.constraint` on every request of `job`: the compiled constraint, or
/// its error as a 400 naming the parameter (503 when the compiler was too busy).
std::optional<ApiError> attach_constraint(GenerationJob& job,
                                          const structured::CompileResult& compiled);

/// Compiles `job.constraint` (when set) with the model's compiler, waiting on this thread, and
/// attaches it: for callers with no thread to keep free (tests, offline tools).
std::optional<ApiError> compile_job_constraint(GenerationJob& job, const ServedModel& model);

}  // namespace pagoda::api
