#include "models/interleave_weights.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#include "backend/cpu/interleaved_rows.h"

namespace pagoda::models {

namespace {

bool interleavable(const cpu::TensorView& v) {
  return cpu::interleave_supported(v.dtype) && v.input_permutation == nullptr && !v.interleaved;
}

std::size_t stored_bytes(const cpu::TensorView& v) {
  return static_cast<std::size_t>(v.num_rows) * v.row_stride;
}

}  // namespace

InterleaveSummary interleave_for_decode(LlamaWeights& weights, cpu::ThreadPool& pool) {
  std::vector<cpu::TensorView*> views;
  for (LlamaLayerWeights& l : weights.layers) {
    for (cpu::TensorView* v :
         {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj}) {
      if (interleavable(*v)) views.push_back(v);
    }
  }
  if (interleavable(weights.lm_head)) views.push_back(&weights.lm_head);
  // Largest first, every thread taking the next matrix when it finishes one: the LM head starts
  // at once and the layers' matrices even out the threads' ends.
  std::stable_sort(views.begin(), views.end(),
                   [](const cpu::TensorView* a, const cpu::TensorView* b) {
                     return stored_bytes(*a) > stored_bytes(*b);
                   });
  std::vector<std::shared_ptr<const cpu::InterleavedMatrix>> panels(views.size());
  std::atomic<std::size_t> next{0};
  // One range per thread; each drains the shared queue, whatever its range.
  pool.parallel_for(
      pool.num_threads(),
      [&](std::int64_t, std::int64_t) {
        for (std::size_t i = next.fetch_add(1); i < views.size(); i = next.fetch_add(1)) {
          panels[i] =
              std::make_shared<const cpu::InterleavedMatrix>(cpu::interleave_rows(*views[i]));
        }
      },
      cpu::ThreadPool::Schedule::kEven);
  InterleaveSummary summary;
  for (std::size_t i = 0; i < views.size(); ++i) {
    summary.sources.emplace_back(static_cast<const std::uint8_t*>(views[i]->data),
                                 stored_bytes(*views[i]));
    *views[i] = panels[i]->view;
    summary.bytes += panels[i]->bytes.size();
    weights.interleaved.push_back(std::move(panels[i]));
  }
  summary.num_matrices = static_cast<int>(views.size());
  return summary;
}

}  // namespace pagoda::models
