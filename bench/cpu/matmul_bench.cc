// Matmul at SmolLM2-135M shapes (hidden 576, intermediate 1536, vocab 49152) and a Llama-7B-like
// 4096 x 4096. Decode (M = 1): weight bytes streamed per second, against memcpy and a pooled
// read of a buffer the same run measures (see ops_bench.cc). Prefill (M = 512): GFLOP/s against
// OpenBLAS sgemm on the same weights already dequantized to fp32.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <array>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_broadcast_avx512.h"
#include "backend/cpu/row_decoder.h"
#include "bench_weights.h"

namespace pagoda::cpu::bench {
namespace {

constexpr std::array kTypes = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                               DType::kQ4_0, DType::kQ4_1, DType::kQ4_K, DType::kQ6_K,
                               DType::kQ5_K, DType::kQ5_0, DType::kQ3_K};
struct Shape {
  std::int64_t n;
  std::int64_t k;
};
// q/o_proj, gate/up_proj, down_proj, lm_head (SmolLM2-135M); a 4096 x 4096 Llama projection.
constexpr std::array kShapes = {Shape{576, 576}, Shape{1536, 576}, Shape{576, 1536},
                                Shape{49152, 576}, Shape{4096, 4096}};
// Larger than the last-level cache, so decode reads weights from DRAM.
constexpr std::size_t kColdBytes = 256u << 20;

ThreadPool& pool() {
  static ThreadPool instance;
  return instance;
}

void label(benchmark::State& state, DType dtype, const Shape& shape, std::int64_t m) {
  state.SetLabel(std::string(dtype_name(dtype)) + " " + std::to_string(m) + "x" +
                 std::to_string(shape.k) + " * (" + std::to_string(shape.n) + "x" +
                 std::to_string(shape.k) + ")^T");
}

void BM_MatmulDecode(benchmark::State& state) {
  const DType dtype = kTypes[static_cast<std::size_t>(state.range(0))];
  const Shape shape = kShapes[static_cast<std::size_t>(state.range(1))];
  WeightSet weights(dtype, shape.n, shape.k, kColdBytes);
  std::vector<float> x(static_cast<std::size_t>(shape.k), 0.5f);
  std::vector<float> y(static_cast<std::size_t>(shape.n));
  for (auto _ : state) {
    matmul(pool(), x.data(), 1, weights.next(), nullptr, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * weights.bytes_per_copy()));
  label(state, dtype, shape, 1);
}
// K-quant rows hold 256-weight super-blocks: only shapes whose K is a multiple of 256.
bool fits(int type, int shape) {
  return kShapes[static_cast<std::size_t>(shape)].k %
             dtype_info(kTypes[static_cast<std::size_t>(type)]).block_size ==
         0;
}

void decode_args(benchmark::internal::Benchmark* b) {
  for (int type = 0; type < static_cast<int>(kTypes.size()); ++type) {
    for (int shape = 0; shape < static_cast<int>(kShapes.size()); ++shape) {
      if (fits(type, shape)) b->Args({type, shape});
    }
  }
}
BENCHMARK(BM_MatmulDecode)->Apply(decode_args)->UseRealTime();

// Rows of x where the direct kernel (weights decoded per 4-row tile) hands over to the packed
// one (weights decoded once into a panel): sets kDirectMaxRows in matmul.cc.
void BM_MatmulCrossover(benchmark::State& state) {
  const auto kernel = static_cast<MatmulKernel>(state.range(0));
  const std::int64_t m = state.range(1);
  const Shape shape{1536, 576};
  WeightSet weights(DType::kQ4_1, shape.n, shape.k, kColdBytes);
  std::vector<float> x(static_cast<std::size_t>(m * shape.k), 0.5f);
  std::vector<float> y(static_cast<std::size_t>(m * shape.n));
  for (auto _ : state) {
    matmul(pool(), x.data(), m, weights.next(), nullptr, y.data(), kernel);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      static_cast<double>(2 * m * shape.n * shape.k) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  label(state, DType::kQ4_1, shape, m);
}
BENCHMARK(BM_MatmulCrossover)
    ->ArgsProduct({{static_cast<int>(MatmulKernel::kDirect),
                    static_cast<int>(MatmulKernel::kPacked)},
                   {2, 4, 8, 16, 32}})
    ->UseRealTime();

// Batched decode: M rows of x (one per running sequence) on one thread, per kernel, for the
// SmolLM2 shapes. Ideal batching costs ~1x the M = 1 time up to the point where the FLOPs, not
// the weight decode, dominate; the direct kernel's time grows ~M/4x because it decodes every
// block again per tile of 4 rows. Args: type, shape, kernel, m (32 MiB of weight copies, so the
// larger shapes stream from memory as in the model).
void BM_MatmulBatchedDecode(benchmark::State& state) {
  static ThreadPool single(1);
  const DType dtype = kTypes[static_cast<std::size_t>(state.range(0))];
  const Shape shape = kShapes[static_cast<std::size_t>(state.range(1))];
  const auto kernel = static_cast<MatmulKernel>(state.range(2));
  const std::int64_t m = state.range(3);
  // 32 MiB of copies: past L2, and quick to fill for the 168 cases.
  WeightSet weights(dtype, shape.n, shape.k, 32u << 20);
  std::vector<float> x(static_cast<std::size_t>(m * shape.k), 0.5f);
  std::vector<float> y(static_cast<std::size_t>(m * shape.n));
  for (auto _ : state) {
    matmul(single, x.data(), m, weights.next(), nullptr, y.data(), kernel);
    benchmark::DoNotOptimize(y.data());
  }
  label(state, dtype, shape, m);
}
BENCHMARK(BM_MatmulBatchedDecode)
    ->ArgsProduct(
        {{3, 5},
         {0, 1, 2, 3},
         {static_cast<int>(MatmulKernel::kDirect), static_cast<int>(MatmulKernel::kPacked),
          static_cast<int>(MatmulKernel::kRowGroup), static_cast<int>(MatmulKernel::kBroadcast),
          static_cast<int>(MatmulKernel::kBroadcastInt16),
          static_cast<int>(MatmulKernel::kDirectInt16)},
         {1, 2, 4, 8, 16, 32, 64}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

constexpr std::int64_t kPrefillRows = 512;

void set_flops(benchmark::State& state, const Shape& shape) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(static_cast<double>(2 * kPrefillRows * shape.n * shape.k) *
                             static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// Args: type, shape, kernel (kPacked or kBlasPanel).
void BM_MatmulPrefill(benchmark::State& state) {
  const DType dtype = kTypes[static_cast<std::size_t>(state.range(0))];
  const Shape shape = kShapes[static_cast<std::size_t>(state.range(1))];
  const auto kernel = static_cast<MatmulKernel>(state.range(2));
  WeightSet weights(dtype, shape.n, shape.k, 0);
  std::vector<float> x(static_cast<std::size_t>(kPrefillRows * shape.k), 0.5f);
  std::vector<float> y(static_cast<std::size_t>(kPrefillRows * shape.n));
  for (auto _ : state) {
    matmul(pool(), x.data(), kPrefillRows, weights.next(), nullptr, y.data(), kernel);
    benchmark::DoNotOptimize(y.data());
  }
  set_flops(state, shape);
  label(state, dtype, shape, kPrefillRows);
}

// The comparator: OpenBLAS owning all cores, on weights dequantized to fp32 beforehand.
void BM_SgemmPrefill(benchmark::State& state) {
  const Shape shape = kShapes[static_cast<std::size_t>(state.range(0))];
  std::vector<float> w(static_cast<std::size_t>(shape.n * shape.k), 0.01f);
  std::vector<float> x(static_cast<std::size_t>(kPrefillRows * shape.k), 0.5f);
  std::vector<float> y(static_cast<std::size_t>(kPrefillRows * shape.n));
  openblas_set_num_threads(pool().num_threads());
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kPrefillRows, static_cast<int>(shape.n),
                static_cast<int>(shape.k), 1.0f, x.data(), static_cast<int>(shape.k), w.data(),
                static_cast<int>(shape.k), 0.0f, y.data(), static_cast<int>(shape.n));
    benchmark::DoNotOptimize(y.data());
  }
  set_flops(state, shape);
  state.SetLabel("fp32 512x" + std::to_string(shape.k) + " * (" + std::to_string(shape.n) + "x" +
                 std::to_string(shape.k) + ")^T");
}

void prefill_args(benchmark::internal::Benchmark* b) {
  const std::array<int, 2> kernels = {static_cast<int>(MatmulKernel::kPacked),
                                      static_cast<int>(MatmulKernel::kBlasPanel)};
  for (int kernel : kernels) {
    for (int type = 0; type < static_cast<int>(kTypes.size()); ++type) {
      for (int shape : {1, 2}) {
        if (fits(type, shape)) b->Args({type, shape, kernel});
      }
    }
    for (int type : {0, 3, 5}) b->Args({type, 4, kernel});
  }
}
// The broadcast kernel's x^T, which runs on the calling thread before every batched matmul:
// m rows of the default model's widths (576 hidden, 1536 intermediate).
void BM_BroadcastTranspose(benchmark::State& state) {
  if (!cpu_has_avx512()) {
    state.SkipWithError("needs AVX-512");
    return;
  }
  const std::int64_t m = state.range(0), k = state.range(1);
  const std::int64_t vectors = (m + avx512::kColumnLanes - 1) / avx512::kColumnLanes;
  std::vector<float> x(static_cast<std::size_t>(m * k), 0.5f);
  std::vector<float> xt(static_cast<std::size_t>(k * vectors * avx512::kColumnLanes));
  for (auto _ : state) {
    avx512::transpose_to_columns(x.data(), m, k, vectors, xt.data());
    benchmark::DoNotOptimize(xt.data());
  }
}
BENCHMARK(BM_BroadcastTranspose)->ArgsProduct({{16, 33}, {576, 1536}});

// Llama-3.2-1B's layer (hidden 2048, intermediate 8192, kv 512) and LM head, one thread, for the
// Q4_K_M types (issue 24) against Q4_1 and Q8_0, and Q5_0 / Q5_1 (a K-quant file's fallback for
// rows that are not whole super-blocks): Args: type (kLlama1BTypes), shape, m, int16 (1:
// the default kernel for m, int16 activations on VNNI; 0: the fp32 kernel for m, which for
// K-quants is the decode_row path). m = 1 reports weight bytes per second, to set against
// BM_ReadBandwidth in the same run; 256 MiB of weight copies, so they stream from DRAM
// ($PAGODA_BENCH_HOT_WEIGHTS: one copy, so a matrix that fits in L2 shows the kernel's own speed).
constexpr std::array kLlama1BTypes = {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ4_1,
                                      DType::kQ8_0, DType::kQ5_0, DType::kQ5_1};
constexpr std::array kLlama1BShapes = {Shape{2048, 2048}, Shape{512, 2048}, Shape{8192, 2048},
                                       Shape{2048, 8192}, Shape{49152, 2048}};

void BM_MatmulLlama1B(benchmark::State& state) {
  static ThreadPool single(1);
  const DType dtype = kLlama1BTypes[static_cast<std::size_t>(state.range(0))];
  const Shape shape = kLlama1BShapes[static_cast<std::size_t>(state.range(1))];
  const std::int64_t m = state.range(2);
  const MatmulKernel kernel = state.range(3) != 0 ? MatmulKernel::kAuto : fp32_matmul_kernel_for(m);
  const bool hot = std::getenv("PAGODA_BENCH_HOT_WEIGHTS") != nullptr;
  WeightSet weights(dtype, shape.n, shape.k, m == 1 && !hot ? kColdBytes : 0);
  std::vector<float> x(static_cast<std::size_t>(m * shape.k), 0.5f);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 29) * 0.03f - 0.4f;
  std::vector<float> y(static_cast<std::size_t>(m * shape.n));
  for (auto _ : state) {
    matmul(single, x.data(), m, weights.next(), nullptr, y.data(), kernel);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * weights.bytes_per_copy()));
  state.counters["Gweights/s"] = benchmark::Counter(
      static_cast<double>(shape.n * shape.k) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.SetLabel(std::string(state.range(3) != 0 ? "int16 " : "fp32 ") + "1T " + std::to_string(m) +
                 "x" + std::to_string(shape.k) + " " + std::string(dtype_name(dtype)) + " " +
                 std::to_string(shape.n) + "x" + std::to_string(shape.k));
}
BENCHMARK(BM_MatmulLlama1B)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 6}, {0, 1, 2, 3, 4}, {1, 4, 8, 16, 32, 512}, {1, 0}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// BM_MatmulLlama1B's int16 cases on weights interleaved at load (interleaved_rows.h; the AVX2
// kernels under PAGODA_CPU_ISA=avx2): Args: type (kLlama1BTypes), shape, m.
void BM_MatmulLlama1BInterleaved(benchmark::State& state) {
  static ThreadPool single(1);
  const DType dtype = kLlama1BTypes[static_cast<std::size_t>(state.range(0))];
  const Shape shape = kLlama1BShapes[static_cast<std::size_t>(state.range(1))];
  const std::int64_t m = state.range(2);
  if (!cpu_has_avx2() || !interleave_supported(dtype)) {
    state.SkipWithError("interleaved weights need AVX2 and an interleave_supported type");
    return;
  }
  const bool hot = std::getenv("PAGODA_BENCH_HOT_WEIGHTS") != nullptr;
  WeightSet weights(dtype, shape.n, shape.k, m == 1 && !hot ? kColdBytes : 0);
  weights.interleave();
  std::vector<float> x(static_cast<std::size_t>(m * shape.k));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 29) * 0.03f - 0.4f;
  std::vector<float> y(static_cast<std::size_t>(m * shape.n));
  for (auto _ : state) {
    matmul(single, x.data(), m, weights.next(), nullptr, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * weights.bytes_per_copy()));
  state.counters["Gweights/s"] = benchmark::Counter(
      static_cast<double>(shape.n * shape.k) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.SetLabel("interleaved 1T " + std::to_string(m) + "x" + std::to_string(shape.k) + " " +
                 std::string(dtype_name(dtype)) + " " + std::to_string(shape.n) + "x" +
                 std::to_string(shape.k));
}
BENCHMARK(BM_MatmulLlama1BInterleaved)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 6}, {0, 1, 2, 3, 4}, {1, 4, 8, 16, 32, 512}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Prefill (m = 512, kBroadcastInt16, one thread) on the same weights row-major and interleaved at
// load: int16_tile against int16_tile_interleaved (matmul_int16_avx512.h, or matmul_int16_avx2.h
// under PAGODA_CPU_ISA=avx2). Args: type
// (kLayoutTypes), shape (kLlama1BShapes), interleaved (0 or 1).
constexpr std::array kLayoutTypes = {DType::kQ4_K, DType::kQ6_K, DType::kQ4_0, DType::kQ8_0};

void BM_MatmulPrefillLayout(benchmark::State& state) {
  static ThreadPool single(1);
  const DType dtype = kLayoutTypes[static_cast<std::size_t>(state.range(0))];
  const Shape shape = kLlama1BShapes[static_cast<std::size_t>(state.range(1))];
  const bool interleaved = state.range(2) != 0;
  if (interleaved && !cpu_has_avx2()) {
    state.SkipWithError("interleaved weights need AVX2");
    return;
  }
  WeightSet weights(dtype, shape.n, shape.k, 0);
  if (interleaved) weights.interleave();
  std::vector<float> x(static_cast<std::size_t>(kPrefillRows * shape.k));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 29) * 0.03f - 0.4f;
  std::vector<float> y(static_cast<std::size_t>(kPrefillRows * shape.n));
  for (auto _ : state) {
    matmul(single, x.data(), kPrefillRows, weights.next(), nullptr, y.data(),
           MatmulKernel::kBroadcastInt16);
    benchmark::DoNotOptimize(y.data());
  }
  set_flops(state, shape);
  state.SetLabel(std::string(interleaved ? "interleaved " : "row-major ") + "1T " +
                 std::to_string(kPrefillRows) + "x" + std::to_string(shape.k) + " " +
                 std::string(dtype_name(dtype)) + " " + std::to_string(shape.n) + "x" +
                 std::to_string(shape.k));
}
BENCHMARK(BM_MatmulPrefillLayout)
    ->ArgsProduct({{0, 1, 2, 3}, {0, 2}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// One thread summing a 512 MiB buffer of 64-bit words (eight accumulators, so the loads set the
// pace): the read bandwidth the m = 1 rows above are set against.
void BM_ReadBandwidth(benchmark::State& state) {
  std::vector<std::uint64_t> buffer((512u << 20) / sizeof(std::uint64_t), 1);
  for (auto _ : state) {
    // Named accumulators: GCC keeps an accumulator array in memory (read_bandwidth.cc).
    std::uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    for (std::size_t i = 0; i + 8 <= buffer.size(); i += 8) {
      a0 += buffer[i];
      a1 += buffer[i + 1];
      a2 += buffer[i + 2];
      a3 += buffer[i + 3];
      a4 += buffer[i + 4];
      a5 += buffer[i + 5];
      a6 += buffer[i + 6];
      a7 += buffer[i + 7];
    }
    benchmark::DoNotOptimize(a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7);
  }
  state.SetBytesProcessed(
      static_cast<std::int64_t>(state.iterations() * buffer.size() * sizeof(std::uint64_t)));
}
BENCHMARK(BM_ReadBandwidth)->UseRealTime()->Unit(benchmark::kMillisecond);

BENCHMARK(BM_MatmulPrefill)->Apply(prefill_args)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SgemmPrefill)->Arg(1)->Arg(2)->Arg(4)->UseRealTime()->Unit(benchmark::kMillisecond);

// The AVX2 int16 kernels (matmul_int16_avx2.h) against the AVX2 fp32 ones, to run under
// PAGODA_CPU_ISA=avx2: Args: type (kAvx2Int16Types), shape (kLlama1BShapes), m, int16 (1: kAuto,
// 0: the fp32 kernel for m); each int16 case is followed by its fp32 twin. m = 512 only on the
// two smaller shapes (one thread). docs/perf/cpu.md, "int16 activations on AVX2".
constexpr std::array kAvx2Int16Types = {DType::kQ4_0, DType::kQ4_1, DType::kQ8_0, DType::kQ4_K};

void BM_MatmulInt16Avx2(benchmark::State& state) {
  static ThreadPool single(1);
  const DType dtype = kAvx2Int16Types[static_cast<std::size_t>(state.range(0))];
  const Shape shape = kLlama1BShapes[static_cast<std::size_t>(state.range(1))];
  const std::int64_t m = state.range(2);
  const MatmulKernel kernel = state.range(3) != 0 ? MatmulKernel::kAuto : fp32_matmul_kernel_for(m);
  WeightSet weights(dtype, shape.n, shape.k, m == 1 ? kColdBytes : 0);
  std::vector<float> x(static_cast<std::size_t>(m * shape.k), 0.5f);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 29) * 0.03f - 0.4f;
  std::vector<float> y(static_cast<std::size_t>(m * shape.n));
  for (auto _ : state) {
    matmul(single, x.data(), m, weights.next(), nullptr, y.data(), kernel);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * weights.bytes_per_copy()));
  state.SetLabel(std::string(state.range(3) != 0 ? "int16 " : "fp32 ") + std::to_string(m) + "x" +
                 std::to_string(shape.k) + " " + std::string(dtype_name(dtype)) + " " +
                 std::to_string(shape.n) + "x" + std::to_string(shape.k));
}
BENCHMARK(BM_MatmulInt16Avx2)
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int type = 0; type < 4; ++type) {
        for (int shape = 0; shape < 5; ++shape) {
          for (int m : {1, 4, 16, 64, 512}) {
            if (m == 512 && shape > 1) continue;
            for (int int16 : {1, 0}) b->Args({type, shape, m, int16});
          }
        }
      }
    })
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace pagoda::cpu::bench
