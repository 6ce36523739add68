// Chat messages to prompt text: the OpenAI message list validated (roles, content as a string or
// text parts, tool calls) and rendered with the model's chat template. Shared by
// /v1/chat/completions and the messages form of /tokenize.
#pragma once

#include <string>

#include "api/api_error.h"
#include "api/served_model.h"

namespace pagoda::api {

/// Renders `body`'s messages (and tools, add_generation_prompt, continue_final_message,
/// chat_template_kwargs) to the prompt text. 400 naming the parameter ("messages[2].role") for
/// an empty list, unknown roles, non-text content parts, wrong types, a template error; 400
/// when the model has no chat template.
ApiErrorOr<std::string> render_chat_prompt(const Json& body, const ServedModel& model);

}  // namespace pagoda::api
