// CudaModelExecutor's decode CUDA graphs: which padded batch sizes get one, the split plan a
// graph keeps, their capture at start-up, and which graph a step replays. The layers they
// capture are run_layers (cuda_model_executor.cc).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "backend/cuda/cuda_device.h"
#include "kernels/common/pdl.cuh"
#include "models/cuda_model_executor.h"

namespace pagoda::models {

std::vector<std::int64_t> CudaModelExecutor::decode_graph_sizes(std::int64_t max_num_seqs) {
  std::vector<std::int64_t> sizes;
  for (const std::int64_t n : {1, 2, 4}) {
    if (n <= max_num_seqs) sizes.push_back(n);
  }
  for (std::int64_t n = 8; n <= max_num_seqs; n += 8) sizes.push_back(n);
  if (max_num_seqs > 0 && sizes.back() != max_num_seqs) sizes.push_back(max_num_seqs);
  return sizes;
}

int CudaModelExecutor::graph_num_splits(std::int64_t num_seqs) const {
  const ModelConfig& c = config_;
  // As many splits as the longest sequence the executor allows would get, so every step's plan
  // (from its own longest sequence) fits in the graph's grid; halved like the eager path's
  // plan when the split-K workspace is too small.
  kernels::DecodeSplitPlan plan =
      kernels::plan_decode_splits(num_seqs, c.num_key_value_heads, c.num_attention_heads,
                                  info_.max_model_len, num_sms_, options_.max_decode_splits);
  while (plan.num_splits > 1 &&
         kernels::decode_workspace_floats(num_seqs, c.num_attention_heads, c.head_dim, plan) >
             decode_workspace_floats_) {
    plan = kernels::decode_plan_with_splits(info_.max_model_len, std::max(1, plan.num_splits / 2));
  }
  return plan.num_splits;
}

std::int32_t CudaModelExecutor::graph_partition_size(const DecodeGraph& graph,
                                                     std::int64_t max_seq_len) const {
  const ModelConfig& c = config_;
  max_seq_len = std::max<std::int64_t>(max_seq_len, 1);
  // The eager plan for a batch of the graph's size, within the graph's grid: splits past the
  // longest sequence exit at once.
  const kernels::DecodeSplitPlan plan =
      kernels::plan_decode_splits(graph.num_seqs, c.num_key_value_heads, c.num_attention_heads,
                                  max_seq_len, num_sms_, options_.max_decode_splits);
  if (plan.num_splits <= graph.num_splits) return plan.partition_size;
  // Whole 64-key tiles within the graph's grid (splits it does not need exit at once).
  return kernels::decode_plan_with_splits(max_seq_len, graph.num_splits).partition_size;
}

CudaModelExecutor::LayerShape CudaModelExecutor::graph_shape(std::int64_t num_seqs,
                                                             int num_splits) const {
  return {.num_tokens = num_seqs,
          .num_seqs = num_seqs,
          .block_table_stride = metadata_.max_blocks_per_seq(),
          .max_query_len = 1,
          .decode = true,
          .plan = {.num_splits = num_splits,
                   .partition_size = 0,
                   .device_partition_size = metadata_.decode_partition_size()},
          .kv_groups = graphs_use_kv_groups_};
}

// One graph per padded batch size, smallest first (small batches are where launch overhead
// shows most), each after one eager run of the same shape: the run loads the kernels and fills
// cuBLASLt's plan cache, so the capture itself issues nothing but launches. The metadata of the
// runs is all padding (no KV slot, seq_len 0), so the cache is never written.
Status CudaModelExecutor::capture_decode_graphs() {
  decode_graphs_.clear();
  graph_stats_ = {};
  const auto start = std::chrono::steady_clock::now();
  PAGODA_ASSIGN_OR_RETURN(cuda::DeviceMemory before, cuda::device_memory());
  const std::int64_t largest = std::min(
      {options_.max_num_seqs, options_.max_graph_num_seqs, options_.max_num_batched_tokens});
  const ForwardBatch padding;
  for (const std::int64_t n : decode_graph_sizes(largest)) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed > options_.graph_capture_time_limit_s) {
      graph_stats_.stopped_by_time_limit = true;
      break;
    }
    DecodeGraph graph{.num_seqs = n, .num_splits = graph_num_splits(n)};
    const LayerShape shape = graph_shape(n, graph.num_splits);
    PAGODA_RETURN_IF_ERROR(metadata_.upload_padded_decode(padding, n, 1, stream_.get()));
    PAGODA_RETURN_IF_ERROR(run_layers(shape));
    PAGODA_RETURN_IF_ERROR(stream_.synchronize());
    auto exec = cuda::CudaGraphExec::capture(stream_.get(), [&] { return run_layers(shape); });
    if (!exec.ok() && kernels::pdl_enabled()) {
      // A driver that cannot hold programmatic-launch edges in a graph: plain launches.
      std::fprintf(stderr,
                   "cuda graphs: capture with programmatic dependent launch failed (%s); "
                   "capturing without it\n",
                   exec.status().to_string().c_str());
      kernels::set_pdl_enabled(false);
      exec = cuda::CudaGraphExec::capture(stream_.get(), [&] { return run_layers(shape); });
    }
    if (!exec.ok()) return exec.status();
    graph.exec = std::move(*exec);
    decode_graphs_.push_back(std::move(graph));
  }
  PAGODA_RETURN_IF_ERROR(stream_.synchronize());
  PAGODA_ASSIGN_OR_RETURN(cuda::DeviceMemory after, cuda::device_memory());
  graph_stats_.count = static_cast<int>(decode_graphs_.size());
  graph_stats_.max_num_seqs = decode_graphs_.empty() ? 0 : decode_graphs_.back().num_seqs;
  graph_stats_.capture_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  graph_stats_.device_bytes = std::max<std::int64_t>(0, before.free_bytes - after.free_bytes);
  return Status::ok_status();
}

const CudaModelExecutor::DecodeGraph* CudaModelExecutor::graph_for(
    const ForwardBatch& batch) const {
  // A graph reads the KV groups' tables for the sliding layers if it was captured so.
  if (!graphs_enabled_ || decode_graphs_.empty() || batch.num_tokens() != batch.num_seqs() ||
      batch.num_seqs() > decode_graphs_.back().num_seqs ||
      batch.max_blocks_per_seq > metadata_.max_blocks_per_seq() ||
      batch.kv_groups.empty() == graphs_use_kv_groups_) {
    return nullptr;
  }
  for (std::int64_t s = 0; s < batch.num_seqs(); ++s) {
    if (batch.query_start_loc[s + 1] - batch.query_start_loc[s] != 1) return nullptr;
  }
  for (const DecodeGraph& graph : decode_graphs_) {
    if (graph.num_seqs >= batch.num_seqs()) return &graph;
  }
  return nullptr;
}

}  // namespace pagoda::models
