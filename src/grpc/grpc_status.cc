#include "grpc/grpc_status.h"

namespace pagoda::grpc {

::grpc::Status to_grpc_status(const api::ApiError& error) {
  return {static_cast<::grpc::StatusCode>(error.code), error.message};
}

::grpc::Status to_grpc_status(const Status& status) {
  if (status.ok()) return ::grpc::Status::OK;
  return {static_cast<::grpc::StatusCode>(status.code()), status.message()};
}

}  // namespace pagoda::grpc
