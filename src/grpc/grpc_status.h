// Pagoda's errors as gRPC statuses. StatusCode values equal gRPC's codes (include/pagoda/status.h),
// so the mapping is the identity; the message is the one the HTTP API puts in its error body.
#pragma once

#include <grpcpp/support/status.h>

#include "api/api_error.h"
#include "pagoda/status.h"

namespace pagoda::grpc {

/// The gRPC status of a refused request (INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED, ...).
::grpc::Status to_grpc_status(const api::ApiError& error);
/// The gRPC status of an engine or loader Status; OK for an ok Status.
::grpc::Status to_grpc_status(const Status& status);

}  // namespace pagoda::grpc
