// The small informational bodies: /v1/models (vLLM's shape) and /version.
#pragma once

#include <string_view>

#include "api/api_error.h"
#include "api/served_model.h"

namespace pagoda::api {

/// {"object": "list", "data": [{id, object: "model", created, owned_by: "pagoda", root,
/// parent: null, max_model_len, permission: []}]}, one entry per served name.
Json models_response(const ServedModel& model);

/// GET /v1/models/{name}: the entry for `name`; 404 when it is not served.
ApiErrorOr<Json> model_response(const ServedModel& model, std::string_view name);

/// {"version": "<pagoda version>"}.
Json version_response();

/// The Pagoda version string ("0.1.0").
std::string_view pagoda_version();

}  // namespace pagoda::api
