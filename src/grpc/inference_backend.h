// What the gRPC services serve once the model has loaded: the same ServedModel and engine as the
// HTTP server, plus the model facts GetModelInfo reports that the protocol layer does not keep.
#pragma once

#include <memory>
#include <string>

#include "api/served_model.h"
#include "engine/engine_client.h"

namespace pagoda::grpc {

/// The served model and its engine.
struct InferenceBackend {
  std::shared_ptr<const api::ServedModel> model;
  /// Must outlive the GrpcServer's stop().
  engine::EngineClient* engine = nullptr;
  /// ModelConfig::architecture ("llama", "qwen2", ...).
  std::string architecture;
};

}  // namespace pagoda::grpc
