// What the gRPC services serve once the model has loaded: the same ServedModel and engine as the
// HTTP server, plus the model facts GetModelInfo reports that the protocol layer does not keep.
#pragma once

#include <memory>
#include <string>

#include "api/served_model.h"
#include "api/serving_metrics.h"
#include "engine/engine_client.h"

namespace pagoda::grpc {

/// The served model and its engine.
struct InferenceBackend {
  std::shared_ptr<const api::ServedModel> model;
  /// Must outlive the GrpcServer's stop().
  engine::EngineClient* engine = nullptr;
  /// ModelConfig::architecture ("llama", "qwen2", ...).
  std::string architecture;
  /// The HTTP server's /metrics registry, so gRPC requests are counted beside HTTP ones
  /// (finished requests' latencies and tokens, refusals by their HTTP status); null counts
  /// nothing.
  std::shared_ptr<api::ServingMetrics> metrics;
};

}  // namespace pagoda::grpc
