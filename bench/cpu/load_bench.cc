// Host-side load time of one 8B-shaped quantized linear layer, the work the CUDA executor does
// per layer before its upload (docs/quantization.md, "Dummy weights quantized at load"): the
// dummy draw quantized at load as the CPU's (quantized_dummy_linear), then the GPU layout
// (fp8_layout / w4a16_layout); a GPTQ checkpoint's layer repacked to Q4_Z; a GGUF Q4_K_M layer
// repacked into the GPU's GGUF form.
//   ./build/bench/cpu/pagoda_load_bench --benchmark_filter=...
#include <benchmark/benchmark.h>

#include <array>
#include <cstring>
#include <random>
#include <vector>

#include "models/device_linear_plan.h"
#include "models/llama_weights.h"
#include "quant/gguf_repack.h"
#include "quant/int4_checkpoint.h"

namespace pagoda::models {
namespace {

// Llama-3.1-8B: gate+up [2 x 14336, 4096] and down [4096, 14336].
constexpr std::array<std::int64_t, 2> kGateUp = {14336, 14336};
constexpr std::array<std::int64_t, 1> kDown = {4096};

quant::LoadTimeQuantization quantization_of(std::int64_t arg) {
  return arg == 0 ? quant::LoadTimeQuantization::kFp8 : quant::LoadTimeQuantization::kInt4;
}

void run(benchmark::State& state, std::span<const std::int64_t> rows, std::int64_t cols) {
  const quant::LoadTimeQuantization q = quantization_of(state.range(0));
  const bool layout = state.range(1) != 0;
  std::int64_t weights = 0;
  for (const std::int64_t r : rows) weights += r * cols;
  for (auto _ : state) {
    StatusOr<QuantizedDummyLinear> drawn = quantized_dummy_linear(7, rows, cols, q);
    if (!drawn.ok()) {
      state.SkipWithError(drawn.status().message().c_str());
      return;
    }
    if (!layout) continue;
    if (q == quant::LoadTimeQuantization::kFp8) {
      StatusOr<quant::Fp8ChannelMatrix> m = fp8_layout(drawn->parts);
      if (!m.ok()) state.SkipWithError(m.status().message().c_str());
      benchmark::DoNotOptimize(m);
    } else {
      StatusOr<quant::W4A16Matrix> m = w4a16_layout(drawn->parts);
      if (!m.ok()) state.SkipWithError(m.status().message().c_str());
      benchmark::DoNotOptimize(m);
    }
  }
  state.counters["Gweights/s"] = benchmark::Counter(static_cast<double>(weights) * 1e-9,
                                                    benchmark::Counter::kIsIterationInvariantRate);
}

// Args: quantization (0 fp8, 1 int4), layout (0: the draw quantized; 1: then the GPU layout).
void BM_LoadGateUp(benchmark::State& state) {
  run(state, kGateUp, 4096);
}
void BM_LoadDown(benchmark::State& state) {
  run(state, kDown, 14336);
}
BENCHMARK(BM_LoadGateUp)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_LoadDown)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime();

// A GPTQ checkpoint's up_proj [14336, 4096], group 128, repacked to Q4_Z as a load does (random
// quants; scales 1/64 in fp16, exactly representable).
void BM_RepackGptqUp(benchmark::State& state) {
  constexpr std::int64_t kRows = 14336;
  constexpr std::int64_t kCols = 4096;
  constexpr std::int64_t kGroups = kCols / 128;
  std::mt19937 rng(5);
  std::vector<std::uint32_t> qweight(kCols / 8 * kRows);
  std::vector<std::uint32_t> qzeros(kGroups * kRows / 8);
  for (std::uint32_t& w : qweight) w = rng();
  for (std::uint32_t& w : qzeros) w = rng();
  const std::vector<std::uint16_t> scales(kGroups * kRows, 0x2400);  // 2^-6 in fp16
  const auto bytes = [](const auto& v) {
    return std::span(reinterpret_cast<const std::uint8_t*>(v.data()), v.size() * sizeof(v[0]));
  };
  const ModelTensor w{"up.qweight", DType::kI32, {kCols / 8, kRows}, bytes(qweight)};
  const ModelTensor z{"up.qzeros", DType::kI32, {kGroups, kRows / 8}, bytes(qzeros)};
  const ModelTensor s{"up.scales", DType::kF16, {kGroups, kRows}, bytes(scales)};
  QuantizationConfig config;
  config.method = QuantizationMethod::kGptq;
  config.bits = 4;
  config.group_size = 128;
  config.zeros_stored_minus_one = true;
  for (auto _ : state) {
    StatusOr<quant::QuantizedMatrix> m =
        quant::repack_gptq("up", {&w, &z, &s, nullptr}, config, kRows, kCols);
    if (!m.ok()) state.SkipWithError(m.status().message().c_str());
    benchmark::DoNotOptimize(m);
  }
  state.counters["Gweights/s"] = benchmark::Counter(static_cast<double>(kRows * kCols) * 1e-9,
                                                    benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_RepackGptqUp)->Unit(benchmark::kMillisecond)->UseRealTime();

// A GGUF Q4_K_M layer repacked into the GPU's GGUF form, as the CUDA executor loads each layer of
// an 8B Q4_K_M file: gate/up (two Q4_K parts, [2 x 14336, 4096]; arg 0) or QKV with a Q6_K V
// (arg 1: Q [4096], K [1024] Q4_K, V [1024] Q6_K: the general form). Random quants; every
// block's d and dmin 2^-10 (valid fp16, so no part is refused).
std::vector<std::uint8_t> random_blocks(DType dtype, std::int64_t rows, std::int64_t cols,
                                        std::mt19937& rng) {
  const bool q6 = dtype == DType::kQ6_K;
  const std::size_t block_bytes = q6 ? 210 : 144;
  std::vector<std::uint8_t> blocks(static_cast<std::size_t>(rows * cols / 256) * block_bytes);
  for (std::uint8_t& b : blocks) b = static_cast<std::uint8_t>(rng());
  for (std::size_t at = 0; at < blocks.size(); at += block_bytes) {
    const std::uint8_t half[2] = {0x00, 0x14};  // 2^-10
    std::memcpy(&blocks[at + (q6 ? 208 : 0)], half, 2);
    if (!q6) std::memcpy(&blocks[at + 2], half, 2);
  }
  return blocks;
}

void BM_RepackGgufQ4KM(benchmark::State& state) {
  struct Part {
    DType dtype;
    std::int64_t rows;
  };
  const bool qkv = state.range(0) != 0;
  const std::vector<Part> shape =
      qkv ? std::vector<Part>{{DType::kQ4_K, 4096}, {DType::kQ4_K, 1024}, {DType::kQ6_K, 1024}}
          : std::vector<Part>{{DType::kQ4_K, 14336}, {DType::kQ4_K, 14336}};
  constexpr std::int64_t kCols = 4096;
  std::mt19937 rng(11);
  std::vector<std::vector<std::uint8_t>> blocks;
  std::vector<quant::GgufPart> parts;
  std::int64_t weights = 0;
  for (const Part& p : shape) {
    blocks.push_back(random_blocks(p.dtype, p.rows, kCols, rng));
    parts.push_back({.dtype = p.dtype,
                     .blocks = blocks.back().data(),
                     .rows = p.rows,
                     .row_stride = blocks.back().size() / static_cast<std::size_t>(p.rows)});
    weights += p.rows * kCols;
  }
  for (auto _ : state) {
    StatusOr<quant::W4A16Matrix> m = quant::repack_gguf_parts(parts, kCols);
    if (!m.ok()) state.SkipWithError(m.status().message().c_str());
    benchmark::DoNotOptimize(m);
  }
  state.counters["Gweights/s"] = benchmark::Counter(static_cast<double>(weights) * 1e-9,
                                                    benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_RepackGgufQ4KM)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace pagoda::models
