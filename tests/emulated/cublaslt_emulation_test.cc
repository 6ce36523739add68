// The emulated cuBLASLt (kernels/emulation/cublaslt_emulation.cc) against float64 on the same
// numbers: every transpose pair and type pair blas_lt.cc can ask for, at shapes that leave the
// emulation's 64 x 4 blocks partial, with leading dimensions past the rows (the padding NaN, so a
// read of it shows), alpha, beta C (apart and in place) and the bias epilogue; FP8 TN with scalar
// scales and, when switched on, OUTER_VEC scale vectors; what it refuses, as cuBLASLt does; and
// what a stream's work keeps from the call (alpha, the descriptor) against what it reads when it
// runs (the operands), through a captured graph. BlasLt itself on top of it closes the file.
//
// Bound: the emulation sums exactly enough (double) to be correctly rounded but for ties, so each
// element is within half an ulp of D's type of the float64 result (u |ref|, plus half the spacing
// of f16's subnormals), and 2^-40 of the terms' magnitude for the sums' order.
#include "kernels/emulation/cublaslt_emulation.h"

#include <cublasLt.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/cuda/blas_lt.h"
#include "model/dequantize.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda {
namespace {

using cuda::ScalarType;
using gpu_test::DeviceVector;

constexpr std::uint8_t kFp8NaN = 0x7F;

ScalarType scalar_type(cudaDataType_t type) {
  return type == CUDA_R_32F ? ScalarType::kF32
                            : (type == CUDA_R_16F ? ScalarType::kF16 : ScalarType::kBF16);
}

const char* type_name(cudaDataType_t type) {
  return type == CUDA_R_8F_E4M3 ? "e4m3" : gpu_test::name_of(scalar_type(type));
}

// Half an ulp of `type` at |v|, plus half of f16's subnormal spacing where that is larger.
double rounding(cudaDataType_t type, double v) {
  const double u = gpu_test::unit_roundoff(scalar_type(type));
  return u * std::abs(v) + (type == CUDA_R_16F ? 0x1p-25 : 0.0);
}

// A column-major matrix on the device: element (i, j) at i + j * ld; the ld - rows padding rows
// NaN. `values` are what the device holds, widened.
struct Matrix {
  cudaDataType_t type = CUDA_R_32F;
  std::int64_t rows = 0, cols = 0, ld = 0;
  std::vector<double> values;  // [cols][rows]
  DeviceVector<std::uint8_t> bytes{std::size_t{1}};

  double at(std::int64_t i, std::int64_t j) const {
    return values[static_cast<std::size_t>(i + j * rows)];
  }
  void* data() const { return bytes.data(); }
};

std::size_t element_bytes(cudaDataType_t type) {
  return type == CUDA_R_8F_E4M3 ? 1 : cuda::scalar_type_size(scalar_type(type));
}

Matrix random_matrix(cudaDataType_t type, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                     std::mt19937& rng) {
  Matrix m{.type = type, .rows = rows, .cols = cols, .ld = ld};
  m.values.resize(static_cast<std::size_t>(rows * cols));
  const auto storage_size = static_cast<std::size_t>(std::max<std::int64_t>(ld * cols, 1));
  std::vector<std::uint8_t> bytes(storage_size * element_bytes(type));
  if (type == CUDA_R_8F_E4M3) {
    std::fill(bytes.begin(), bytes.end(), kFp8NaN);
    for (std::int64_t j = 0; j < cols; ++j) {
      for (std::int64_t i = 0; i < rows; ++i) {
        // |value| < 8 (exponent field up to 9, subnormals included): f16 holds the sums.
        const auto code =
            static_cast<std::uint8_t>((rng() & 0x80) | (rng() % 10) << 3 | (rng() & 7));
        bytes[static_cast<std::size_t>(i + j * ld)] = code;
        m.values[static_cast<std::size_t>(i + j * rows)] = fp8_e4m3_to_float(code);
      }
    }
  } else {
    std::vector<float> storage(storage_size, std::numeric_limits<float>::quiet_NaN());
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (std::int64_t j = 0; j < cols; ++j) {
      for (std::int64_t i = 0; i < rows; ++i)
        storage[static_cast<std::size_t>(i + j * ld)] = dist(rng);
    }
    storage = gpu_test::round_to(storage, scalar_type(type));
    for (std::int64_t j = 0; j < cols; ++j) {
      for (std::int64_t i = 0; i < rows; ++i) {
        m.values[static_cast<std::size_t>(i + j * rows)] =
            storage[static_cast<std::size_t>(i + j * ld)];
      }
    }
    cuda::convert_from_f32(storage.data(), static_cast<std::int64_t>(storage.size()),
                           scalar_type(type), bytes.data());
  }
  m.bytes = DeviceVector<std::uint8_t>(bytes);
  return m;
}

// D's elements as the device holds them, widened (the padding left out).
std::vector<double> download(const Matrix& d) {
  const std::vector<std::uint8_t> bytes = d.bytes.download();
  std::vector<float> wide(static_cast<std::size_t>(d.ld * d.cols));
  cuda::convert_to_f32(bytes.data(), static_cast<std::int64_t>(wide.size()), scalar_type(d.type),
                       wide.data());
  std::vector<double> out(static_cast<std::size_t>(d.rows * d.cols));
  for (std::int64_t j = 0; j < d.cols; ++j) {
    for (std::int64_t i = 0; i < d.rows; ++i) {
      out[static_cast<std::size_t>(i + j * d.rows)] = wide[static_cast<std::size_t>(i + j * d.ld)];
    }
  }
  return out;
}

// One product as blas_lt.cc issues it: descriptor, layouts, preference, heuristic, matmul.
struct Call {
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  cudaDataType_t a_type = CUDA_R_32F, b_type = CUDA_R_32F, c_type = CUDA_R_32F, d_type = CUDA_R_32F;
  std::int64_t a_rows = 0, a_cols = 0, a_ld = 0;
  std::int64_t b_rows = 0, b_cols = 0, b_ld = 0;
  std::int64_t c_rows = 0, c_cols = 0, c_ld = 0;
  std::int64_t d_rows = 0, d_cols = 0, d_ld = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;
  void* d = nullptr;
  bool bias_epilogue = false;
  const void* bias = nullptr;
  bool outer_vec = false;
  const float* a_scale = nullptr;
  const float* b_scale = nullptr;
  float alpha = 1.0f, beta = 0.0f;
  bool null_alpha = false;
};

// The call's operands from matrices (C may be D itself).
Call call_on(const Matrix& a, const Matrix& b, const Matrix& c, const Matrix& d,
             cublasOperation_t trans_a, cublasOperation_t trans_b) {
  return Call{.trans_a = trans_a,
              .trans_b = trans_b,
              .a_type = a.type,
              .b_type = b.type,
              .c_type = c.type,
              .d_type = d.type,
              .a_rows = a.rows,
              .a_cols = a.cols,
              .a_ld = a.ld,
              .b_rows = b.rows,
              .b_cols = b.cols,
              .b_ld = b.ld,
              .c_rows = c.rows,
              .c_cols = c.cols,
              .c_ld = c.ld,
              .d_rows = d.rows,
              .d_cols = d.cols,
              .d_ld = d.ld,
              .a = a.data(),
              .b = b.data(),
              .c = c.data(),
              .d = d.data()};
}

struct Outcome {
  cublasStatus_t heuristic = CUBLAS_STATUS_SUCCESS;
  int algorithms = 0;
  cublasStatus_t matmul = CUBLAS_STATUS_SUCCESS;
};

// Issues `call` on `stream`, with the heuristic's algorithm, or none (cuBLASLt's own choice) when
// the heuristic found none, so that cublasLtMatmul's own checks show too.
Outcome issue(const Call& call, cudaStream_t stream = nullptr) {
  cublasLtHandle_t handle = nullptr;
  EXPECT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t desc = nullptr;
  EXPECT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  const auto set = [&](cublasLtMatmulDescAttributes_t attr, const auto& value) {
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)),
              CUBLAS_STATUS_SUCCESS)
        << "attribute " << attr;
  };
  set(CUBLASLT_MATMUL_DESC_TRANSA, call.trans_a);
  set(CUBLASLT_MATMUL_DESC_TRANSB, call.trans_b);
  if (call.bias_epilogue) {
    set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, call.bias);
  }
  if (call.outer_vec) {
    set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F);
    set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F);
  }
  if (call.a_scale != nullptr) set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, call.a_scale);
  if (call.b_scale != nullptr) set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, call.b_scale);
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  const auto layout = [](cublasLtMatrixLayout_t* l, cudaDataType_t type, std::int64_t rows,
                         std::int64_t cols, std::int64_t ld) {
    EXPECT_EQ(cublasLtMatrixLayoutCreate(l, type, static_cast<std::uint64_t>(rows),
                                         static_cast<std::uint64_t>(cols), ld),
              CUBLAS_STATUS_SUCCESS);
  };
  layout(&a, call.a_type, call.a_rows, call.a_cols, call.a_ld);
  layout(&b, call.b_type, call.b_rows, call.b_cols, call.b_ld);
  layout(&c, call.c_type, call.c_rows, call.c_cols, call.c_ld);
  layout(&d, call.d_type, call.d_rows, call.d_cols, call.d_ld);
  cublasLtMatmulPreference_t preference = nullptr;
  EXPECT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
  const std::uint64_t workspace = 1 << 20;
  EXPECT_EQ(
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspace, sizeof(workspace)),
      CUBLAS_STATUS_SUCCESS);
  Outcome out;
  cublasLtMatmulHeuristicResult_t result{};
  out.heuristic = cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, c, d, preference, 1, &result,
                                                 &out.algorithms);
  out.matmul = cublasLtMatmul(handle, desc, call.null_alpha ? nullptr : &call.alpha, call.a, a,
                              call.b, b, &call.beta, call.c, c, call.d, d,
                              out.algorithms > 0 ? &result.algo : nullptr, nullptr, 0, stream);
  cublasLtMatmulPreferenceDestroy(preference);
  for (cublasLtMatrixLayout_t l : {a, b, c, d}) cublasLtMatrixLayoutDestroy(l);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(handle);
  return out;
}

// Scales and bias of a product, on the host beside their device copies.
struct Epilogue {
  std::vector<double> row_scale, col_scale;  // [m], [n]; empty: 1
  double scalar_scale = 1.0;
  std::vector<double> bias;  // [m]; empty: none
};

// D after `call` in float64, each element checked against the bound in the header.
void expect_matches_float64(const Call& call, const Matrix& a, const Matrix& b, const Matrix& c,
                            const Matrix& d, const Epilogue& e, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<double> got = download(d);
  const std::int64_t m = d.rows, n = d.cols;
  const std::int64_t k = call.trans_a == CUBLAS_OP_N ? a.cols : a.rows;
  int failures = 0;
  for (std::int64_t j = 0; j < n && failures < 5; ++j) {
    for (std::int64_t i = 0; i < m && failures < 5; ++i) {
      double sum = 0.0, magnitude = 0.0;
      for (std::int64_t q = 0; q < k; ++q) {
        const double x = call.trans_a == CUBLAS_OP_N ? a.at(i, q) : a.at(q, i);
        const double y = call.trans_b == CUBLAS_OP_N ? b.at(q, j) : b.at(j, q);
        sum += x * y;
        magnitude += std::abs(x * y);
      }
      const double factor = call.alpha * e.scalar_scale *
                            (e.row_scale.empty() ? 1.0 : e.row_scale[static_cast<std::size_t>(i)]) *
                            (e.col_scale.empty() ? 1.0 : e.col_scale[static_cast<std::size_t>(j)]);
      double ref = factor * sum;
      magnitude = std::abs(factor) * magnitude;
      if (call.beta != 0.0f) {
        ref += call.beta * c.at(i, j);
        magnitude += std::abs(call.beta * c.at(i, j));
      }
      if (!e.bias.empty()) ref += e.bias[static_cast<std::size_t>(i)];
      const double g = got[static_cast<std::size_t>(i + j * m)];
      const double bound = rounding(d.type, ref) + 0x1p-40 * magnitude;
      if (!(std::abs(g - ref) <= bound)) {
        ADD_FAILURE() << "D(" << i << ", " << j << ") = " << g << ", want " << ref << " +- "
                      << bound;
        ++failures;
      }
    }
  }
}

// A bias vector of `type` on the device, and its values.
struct Bias {
  std::vector<double> values;
  DeviceVector<std::uint8_t> bytes{std::size_t{1}};
};
Bias random_bias(cudaDataType_t type, std::int64_t m, std::mt19937& rng) {
  Matrix v = random_matrix(type, m, 1, m, rng);
  return {std::move(v.values), std::move(v.bytes)};
}

// The switch back off at the end of a test that turned it on.
struct OuterVecScales {
  explicit OuterVecScales(bool on) { emulation::set_cublaslt_outer_vec_scales(on); }
  ~OuterVecScales() { emulation::set_cublaslt_outer_vec_scales(false); }
};

TEST(EmulatedCublasLt, MatchesFloat64OnEveryTransposeAndType) {
  std::mt19937 rng(1);
  struct Types {
    cudaDataType_t in, out;
  };
  int index = 0;
  for (const Types t : {Types{CUDA_R_32F, CUDA_R_32F}, Types{CUDA_R_16F, CUDA_R_16F},
                        Types{CUDA_R_16BF, CUDA_R_16BF}, Types{CUDA_R_16F, CUDA_R_32F},
                        Types{CUDA_R_16BF, CUDA_R_32F}}) {
    for (const cublasOperation_t ta : {CUBLAS_OP_N, CUBLAS_OP_T}) {
      for (const cublasOperation_t tb : {CUBLAS_OP_N, CUBLAS_OP_T}) {
        // One row and column, partial blocks, and more than one row block (64) and column block.
        for (const auto& [m, n, k] :
             std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>>{
                 {1, 1, 1}, {37, 5, 19}, {70, 9, 130}}) {
          ++index;
          const std::int64_t pad = index % 2 == 0 ? 3 : 0;
          const bool with_bias = index % 3 != 0;
          const float beta = index % 4 == 0 ? 0.0f : -1.5f;
          const std::string what =
              std::string(type_name(t.in)) + " -> " + type_name(t.out) +
              (ta == CUBLAS_OP_N ? " N" : " T") + (tb == CUBLAS_OP_N ? "N " : "T ") +
              std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " pad " +
              std::to_string(pad) + " beta " + std::to_string(beta) + (with_bias ? " bias" : "");
          const std::int64_t a_rows = ta == CUBLAS_OP_N ? m : k, a_cols = ta == CUBLAS_OP_N ? k : m;
          const std::int64_t b_rows = tb == CUBLAS_OP_N ? k : n, b_cols = tb == CUBLAS_OP_N ? n : k;
          const Matrix a = random_matrix(t.in, a_rows, a_cols, a_rows + pad, rng);
          const Matrix b = random_matrix(t.in, b_rows, b_cols, b_rows + 2 * pad, rng);
          const Matrix c = random_matrix(t.out, m, n, m + pad, rng);
          const Matrix d = random_matrix(t.out, m, n, m + 2 * pad, rng);
          ASSERT_EQ(
              cudaMemset(d.data(), 0xff, static_cast<std::size_t>(d.ld * n) * element_bytes(t.out)),
              cudaSuccess);  // NaN: beta = 0 must not read it
          const Bias bias = random_bias(t.out, m, rng);
          Call call = call_on(a, b, c, d, ta, tb);
          call.alpha = 0.75f;
          call.beta = beta;
          call.bias_epilogue = with_bias;
          call.bias = bias.bytes.data();
          const Outcome out = issue(call);
          ASSERT_EQ(out.heuristic, CUBLAS_STATUS_SUCCESS) << what;
          ASSERT_EQ(out.algorithms, 1) << what;
          ASSERT_EQ(out.matmul, CUBLAS_STATUS_SUCCESS) << what;
          expect_matches_float64(call, a, b, c, d,
                                 {.bias = with_bias ? bias.values : std::vector<double>{}}, what);
        }
      }
    }
  }
}

// C = D, as blas_lt.cc passes it: beta C reads D before it is written.
TEST(EmulatedCublasLt, AccumulatesInPlace) {
  std::mt19937 rng(2);
  for (const cudaDataType_t type : {CUDA_R_16BF, CUDA_R_32F}) {
    const std::int64_t m = 67, n = 6, k = 33;
    const Matrix a = random_matrix(type, k, m, k + 1, rng);
    const Matrix b = random_matrix(type, k, n, k, rng);
    const Matrix d = random_matrix(type, m, n, m + 5, rng);
    const Bias bias = random_bias(type, m, rng);
    Call call = call_on(a, b, d, d, CUBLAS_OP_T, CUBLAS_OP_N);
    call.beta = 1.0f;
    call.bias_epilogue = true;
    call.bias = bias.bytes.data();
    ASSERT_EQ(issue(call).matmul, CUBLAS_STATUS_SUCCESS);
    // d's host values are C's: the product rewrote only the device's.
    expect_matches_float64(call, a, b, d, d, {.bias = bias.values},
                           std::string("in place ") + type_name(type));
  }
}

// FP8 TN as BlasLt::linear_fp8_sums issues it (fp32 out) and with scalar scales and a bias
// (bfloat16 for an fp32 D, D's type otherwise).
TEST(EmulatedCublasLt, Fp8TnWithScalarScales) {
  std::mt19937 rng(3);
  const DeviceVector<float> a_scale(std::vector<float>{0.5f}), b_scale(std::vector<float>{0.375f});
  for (const cudaDataType_t out : {CUDA_R_32F, CUDA_R_16BF, CUDA_R_16F}) {
    for (const auto& [m, n, k] : std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>>{
             {48, 7, 64}, {72, 5, 1040}}) {
      for (const bool scaled : {false, true}) {
        const std::string what = std::string("e4m3 -> ") + type_name(out) + " " +
                                 std::to_string(m) + "x" + std::to_string(n) + "x" +
                                 std::to_string(k) + (scaled ? " scaled, bias" : "");
        const Matrix a = random_matrix(CUDA_R_8F_E4M3, k, m, k, rng);
        const Matrix b = random_matrix(CUDA_R_8F_E4M3, k, n, k + 16, rng);
        const Matrix d = random_matrix(out, m, n, m, rng);
        const cudaDataType_t bias_type = out == CUDA_R_32F ? CUDA_R_16BF : out;
        const Bias bias = random_bias(bias_type, m, rng);
        Call call = call_on(a, b, d, d, CUBLAS_OP_T, CUBLAS_OP_N);
        if (scaled) {
          call.a_scale = a_scale.data();
          call.b_scale = b_scale.data();
          call.bias_epilogue = true;
          call.bias = bias.bytes.data();
        }
        ASSERT_EQ(issue(call).matmul, CUBLAS_STATUS_SUCCESS) << what;
        expect_matches_float64(call, a, b, d, d,
                               {.scalar_scale = scaled ? 0.5 * 0.375 : 1.0,
                                .bias = scaled ? bias.values : std::vector<double>{}},
                               what);
      }
    }
  }
}

// Hopper's answer by default (INVALID_VALUE from the heuristic and the product, as GPU run 15
// saw); with the switch on, per-row scales of A (D's rows) and B (D's columns).
TEST(EmulatedCublasLt, OuterVecScalesFollowTheSwitch) {
  std::mt19937 rng(4);
  const std::int64_t m = 80, n = 9, k = 48;
  const Matrix a = random_matrix(CUDA_R_8F_E4M3, k, m, k, rng);
  const Matrix b = random_matrix(CUDA_R_8F_E4M3, k, n, k, rng);
  const Matrix d = random_matrix(CUDA_R_16BF, m, n, m, rng);
  const std::vector<float> a_scales = gpu_test::random_vector(m, rng, 1.0f / 4096, 1.0f / 256);
  const std::vector<float> b_scales = gpu_test::random_vector(n, rng, 1.0f / 512, 1.0f / 128);
  const DeviceVector<float> da(a_scales), db(b_scales);
  const Bias bias = random_bias(CUDA_R_16BF, m, rng);
  Call call = call_on(a, b, d, d, CUBLAS_OP_T, CUBLAS_OP_N);
  call.outer_vec = true;
  call.a_scale = da.data();
  call.b_scale = db.data();
  call.bias_epilogue = true;
  call.bias = bias.bytes.data();

  EXPECT_FALSE(emulation::cublaslt_outer_vec_scales());
  const Outcome hopper = issue(call);
  EXPECT_EQ(hopper.heuristic, CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(hopper.algorithms, 0);
  EXPECT_EQ(hopper.matmul, CUBLAS_STATUS_INVALID_VALUE);

  const OuterVecScales on(true);
  const Outcome blackwell = issue(call);
  EXPECT_EQ(blackwell.heuristic, CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(blackwell.matmul, CUBLAS_STATUS_SUCCESS);
  expect_matches_float64(call, a, b, d, d,
                         {.row_scale = {a_scales.begin(), a_scales.end()},
                          .col_scale = {b_scales.begin(), b_scales.end()},
                          .bias = bias.values},
                         "outer vec");
}

// Each change to a call cuBLASLt accepts, and what the heuristic and the product answer.
TEST(EmulatedCublasLt, RefusesWhatCublasLtRefuses) {
  std::mt19937 rng(5);
  const std::int64_t m = 16, n = 8, k = 64;
  const Matrix a16 = random_matrix(CUDA_R_16BF, k, m, k, rng);
  const Matrix b16 = random_matrix(CUDA_R_16BF, k, n, k, rng);
  const Matrix d16 = random_matrix(CUDA_R_16BF, m, n, m, rng);
  const Matrix a8 = random_matrix(CUDA_R_8F_E4M3, k, m, k, rng);
  const Matrix b8 = random_matrix(CUDA_R_8F_E4M3, k, n, k, rng);
  const Bias bias = random_bias(CUDA_R_16BF, m, rng);
  const DeviceVector<float> scale(std::vector<float>(m, 1.0f));
  Call good16 = call_on(a16, b16, d16, d16, CUBLAS_OP_T, CUBLAS_OP_N);
  good16.bias_epilogue = true;
  good16.bias = bias.bytes.data();
  const Call good8 = call_on(a8, b8, d16, d16, CUBLAS_OP_T, CUBLAS_OP_N);
  ASSERT_EQ(issue(good16).matmul, CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(issue(good8).matmul, CUBLAS_STATUS_SUCCESS);

  constexpr cublasStatus_t kOk = CUBLAS_STATUS_SUCCESS, kInvalid = CUBLAS_STATUS_INVALID_VALUE,
                           kUnsupported = CUBLAS_STATUS_NOT_SUPPORTED;
  struct Case {
    const char* what;
    const Call& base;
    std::function<void(Call&)> change;
    cublasStatus_t heuristic, matmul;
  };
  const std::vector<Case> cases = {
      {"B's k differs from A's", good16, [](Call& c) { c.b_rows = k - 1, c.b_ld = k - 1; },
       kInvalid, kInvalid},
      {"C of another shape", good16, [](Call& c) { c.c_cols = n - 1; }, kInvalid, kInvalid},
      {"ld below the rows", good16, [](Call& c) { c.a_ld = k - 1; }, kInvalid, kInvalid},
      {"A and B of different types", good16, [](Call& c) { c.b_type = CUDA_R_16F; }, kUnsupported,
       kUnsupported},
      {"f16 in, bf16 out", good16, [](Call& c) { c.a_type = c.b_type = CUDA_R_16F; }, kUnsupported,
       kUnsupported},
      {"C's type not D's", good16, [](Call& c) { c.c_type = CUDA_R_32F; }, kUnsupported,
       kUnsupported},
      {"BIAS without its pointer", good16, [](Call& c) { c.bias = nullptr; }, kOk, kInvalid},
      {"no A", good16, [](Call& c) { c.a = nullptr; }, kOk, kInvalid},
      {"no alpha", good16, [](Call& c) { c.null_alpha = true; }, kOk, kInvalid},
      {"beta without C", good16, [](Call& c) { c.beta = 1.0f, c.c = nullptr; }, kOk, kInvalid},
      {"in place with another ld", good16, [](Call& c) { c.c_ld = m + 1; }, kOk, kInvalid},
      {"a scale on bf16 operands", good16, [&](Call& c) { c.a_scale = scale.data(); }, kInvalid,
       kInvalid},
      {"FP8 NN", good8,
       [](Call& c) {
         c.trans_a = CUBLAS_OP_N;
         std::swap(c.a_rows, c.a_cols);
         c.a_ld = c.a_rows;
       },
       kUnsupported, kUnsupported},
      {"FP8 with k = 40", good8, [](Call& c) { c.a_rows = c.b_rows = c.a_ld = c.b_ld = 40; },
       kUnsupported, kUnsupported},
      {"FP8 ld off 16 bytes", good8, [](Call& c) { c.b_ld = k + 8; }, kUnsupported, kUnsupported},
      {"FP8 A off 16 bytes", good8,
       [](Call& c) { c.a = static_cast<const std::uint8_t*>(c.a) + 1; }, kOk, kUnsupported},
      {"FP8 x bf16", good8, [](Call& c) { c.b_type = CUDA_R_16BF; }, kUnsupported, kUnsupported},
      {"FP8 out", good8, [](Call& c) { c.c_type = c.d_type = CUDA_R_8F_E4M3; }, kUnsupported,
       kUnsupported},
      {"OUTER_VEC on Hopper", good8,
       [&](Call& c) {
         c.outer_vec = true;
         c.a_scale = c.b_scale = scale.data();
       },
       kInvalid, kInvalid},
  };
  for (const Case& c : cases) {
    Call call = c.base;
    c.change(call);
    const Outcome out = issue(call);
    EXPECT_EQ(out.heuristic, c.heuristic) << c.what;
    EXPECT_EQ(out.algorithms, c.heuristic == kOk ? 1 : 0) << c.what;
    EXPECT_EQ(out.matmul, c.matmul) << c.what;
  }
  {
    const OuterVecScales on(true);
    Call call = good16;
    call.outer_vec = true;
    call.a_scale = call.b_scale = scale.data();
    EXPECT_EQ(issue(call).matmul, kInvalid) << "OUTER_VEC on bf16 operands";
  }
}

// Refusals outside a product's shape and pointers: handles, attributes, the heuristic's request,
// an algorithm found for other types.
TEST(EmulatedCublasLt, RefusesBadHandlesAttributesAndAlgorithms) {
  cublasLtMatmulDesc_t desc = nullptr;
  EXPECT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F),
            CUBLAS_STATUS_NOT_SUPPORTED);
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  const std::int64_t wide = CUBLAS_OP_T;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &wide, sizeof(wide)),
            CUBLAS_STATUS_INVALID_VALUE);
  const std::int32_t bad_op = 7;
  EXPECT_EQ(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &bad_op, sizeof(bad_op)),
      CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, nullptr, 4),
            CUBLAS_STATUS_INVALID_VALUE);
  const cublasLtEpilogue_t relu = CUBLASLT_EPILOGUE_RELU_BIAS;
  EXPECT_EQ(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &relu, sizeof(relu)),
      CUBLAS_STATUS_NOT_SUPPORTED);
  const std::int32_t device_mode = CUBLASLT_POINTER_MODE_DEVICE;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &device_mode,
                                           sizeof(device_mode)),
            CUBLAS_STATUS_NOT_SUPPORTED);
  const std::int32_t block_scales = CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &block_scales,
                                           sizeof(block_scales)),
            CUBLAS_STATUS_NOT_SUPPORTED);
  cublasLtMatrixLayout_t layout = nullptr;
  EXPECT_EQ(cublasLtMatrixLayoutCreate(&layout, CUDA_R_8I, 4, 4, 4), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, 4, 4, -1), CUBLAS_STATUS_INVALID_VALUE);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, 4, 4, 4), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulPreference_t preference = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
  const std::uint32_t narrow = 1;
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(
                preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &narrow, sizeof(narrow)),
            CUBLAS_STATUS_INVALID_VALUE);

  cublasLtHandle_t handle = nullptr;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result{};
  int count = -1;
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(nullptr, desc, layout, layout, layout, layout,
                                           preference, 1, &result, &count),
            CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(handle, desc, layout, layout, layout, layout, preference,
                                           0, &result, &count),
            CUBLAS_STATUS_INVALID_VALUE);
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(handle, desc, layout, layout, layout, layout, preference,
                                           1, &result, &count),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(count, 1);

  // The fp32 algorithm on a bf16 product.
  DeviceVector<std::uint16_t> data(16);
  cublasLtMatrixLayout_t layout16 = nullptr;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&layout16, CUDA_R_16BF, 4, 4, 4), CUBLAS_STATUS_SUCCESS);
  const float alpha = 1.0f, beta = 0.0f;
  const auto matmul = [&](cublasLtHandle_t h, const cublasLtMatmulAlgo_t* algo) {
    return cublasLtMatmul(h, desc, &alpha, data.data(), layout16, data.data(), layout16, &beta,
                          data.data(), layout16, data.data(), layout16, algo, nullptr, 0, nullptr);
  };
  EXPECT_EQ(matmul(handle, &result.algo), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(matmul(nullptr, nullptr), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(matmul(handle, nullptr), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  cublasLtMatrixLayoutDestroy(layout16);
  cublasLtMatrixLayoutDestroy(layout);
  cublasLtMatmulPreferenceDestroy(preference);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(handle);
}

// A product captured into a graph keeps what the call gave it (alpha from the host, the bias
// pointer in the descriptor, both changed after the call) and reads the operands at each replay,
// as on a GPU, where blas_lt.cc rewrites a plan's bias pointer before every product.
TEST(EmulatedCublasLt, StreamWorkKeepsTheCallsArguments) {
  std::mt19937 rng(6);
  const std::int64_t m = 24, n = 3, k = 16;
  const Matrix a = random_matrix(CUDA_R_32F, k, m, k, rng);
  const Matrix b = random_matrix(CUDA_R_32F, k, n, k, rng);
  const Matrix d = random_matrix(CUDA_R_32F, m, n, m, rng);
  const Bias kept = random_bias(CUDA_R_32F, m, rng), later = random_bias(CUDA_R_32F, m, rng);

  cublasLtHandle_t handle = nullptr;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t desc = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  const cublasOperation_t t = CUBLAS_OP_T;
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                           sizeof(epilogue)),
            CUBLAS_STATUS_SUCCESS);
  const auto set_bias = [&](const void* bias) {
    return cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                          sizeof(bias));
  };
  ASSERT_EQ(set_bias(kept.bytes.data()), CUBLAS_STATUS_SUCCESS);
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, k, m, k), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m), CUBLAS_STATUS_SUCCESS);

  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  float alpha = 2.0f;
  const float beta = 0.0f;
  ASSERT_EQ(cublasLtMatmul(handle, desc, &alpha, a.data(), la, b.data(), lb, &beta, d.data(), ld,
                           d.data(), ld, nullptr, nullptr, 0, stream),
            CUBLAS_STATUS_SUCCESS);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiateWithFlags(&exec, graph, 0), cudaSuccess);
  alpha = 5.0f;
  ASSERT_EQ(set_bias(later.bytes.data()), CUBLAS_STATUS_SUCCESS);

  // Each replay reads A as it is then (rewritten in place), with alpha 2 and the first bias.
  const Call call{.trans_a = CUBLAS_OP_T, .alpha = 2.0f};
  for (int replay = 0; replay < 2; ++replay) {
    const Matrix now = random_matrix(CUDA_R_32F, k, m, k, rng);
    ASSERT_EQ(cudaMemcpy(a.data(), now.data(), static_cast<std::size_t>(k * m) * sizeof(float),
                         cudaMemcpyDeviceToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    expect_matches_float64(call, now, b, d, d, {.bias = kept.values},
                           "replay " + std::to_string(replay));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(handle);
}

// Row-major y [m, n] against float64: x [m, k] (codes times x_scales when given) times w [n, k]
// (times w_scales) plus bias [n].
void expect_linear(const std::vector<float>& got, const std::vector<double>& x,
                   const std::vector<double>& w, const std::vector<double>& x_scales,
                   const std::vector<double>& w_scales, const std::vector<double>& bias,
                   std::int64_t m, std::int64_t n, std::int64_t k, cudaDataType_t out,
                   const std::string& what) {
  SCOPED_TRACE(what);
  int failures = 0;
  for (std::int64_t i = 0; i < m && failures < 5; ++i) {
    for (std::int64_t j = 0; j < n && failures < 5; ++j) {
      double sum = 0.0, magnitude = 0.0;
      for (std::int64_t q = 0; q < k; ++q) {
        const double p =
            x[static_cast<std::size_t>(i * k + q)] * w[static_cast<std::size_t>(j * k + q)];
        sum += p;
        magnitude += std::abs(p);
      }
      const double factor = (x_scales.empty() ? 1.0 : x_scales[static_cast<std::size_t>(i)]) *
                            (w_scales.empty() ? 1.0 : w_scales[static_cast<std::size_t>(j)]);
      const double ref = factor * sum + (bias.empty() ? 0.0 : bias[static_cast<std::size_t>(j)]);
      const double g = got[static_cast<std::size_t>(i * n + j)];
      const double bound = rounding(out, ref) + 0x1p-40 * std::abs(factor) * magnitude;
      if (!(std::abs(g - ref) <= bound)) {
        ADD_FAILURE() << "y[" << i << ", " << j << "] = " << g << ", want " << ref << " +- "
                      << bound;
        ++failures;
      }
    }
  }
}

cudaDataType_t data_type(ScalarType type) {
  return type == ScalarType::kF32 ? CUDA_R_32F
                                  : (type == ScalarType::kF16 ? CUDA_R_16F : CUDA_R_16BF);
}

// BlasLt (src/backend/cuda/blas_lt.cc) on the emulation, at the executor's test models' shapes
// (hidden 256) and an odd one: each kind of product it issues.
TEST(EmulatedCublasLt, BlasLtProductsMatchFloat64) {
  auto blas = cuda::BlasLt::create(1 << 20);
  ASSERT_TRUE(blas.ok()) << blas.status().to_string();
  std::mt19937 rng(7);
  const auto widen = [](const std::vector<float>& v) {
    return std::vector<double>(v.begin(), v.end());
  };
  struct Types {
    ScalarType in, out;
  };
  for (const Types t :
       {Types{ScalarType::kF32, ScalarType::kF32}, Types{ScalarType::kBF16, ScalarType::kBF16},
        Types{ScalarType::kF16, ScalarType::kF16}, Types{ScalarType::kBF16, ScalarType::kF32}}) {
    for (const auto& [n, k] :
         std::vector<std::pair<std::int64_t, std::int64_t>>{{256, 256}, {77, 100}}) {
      for (const std::int64_t m : {1, 7, 33}) {
        const bool with_bias = t.in == t.out && m != 7;
        const std::string what = std::string(gpu_test::name_of(t.in)) + " -> " +
                                 gpu_test::name_of(t.out) + " m=" + std::to_string(m) +
                                 " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                                 (with_bias ? " bias" : "");
        const auto at = [](std::int64_t v) { return static_cast<std::size_t>(v); };
        const std::vector<float> x =
            gpu_test::round_to(gpu_test::random_vector(at(m * k), rng), t.in);
        const std::vector<float> w =
            gpu_test::round_to(gpu_test::random_vector(at(n * k), rng), t.in);
        const std::vector<float> bias =
            gpu_test::round_to(gpu_test::random_vector(at(n), rng), t.in);
        gpu_test::DeviceArray dx(x, t.in), dw(w, t.in), db(bias, t.in), dy(at(m * n), t.out);
        dy.poison();
        const Status s = (*blas)->linear({.x = dx.data(),
                                          .w = dw.data(),
                                          .bias = with_bias ? db.data() : nullptr,
                                          .y = dy.data(),
                                          .m = m,
                                          .n = n,
                                          .k = k,
                                          .input_type = t.in,
                                          .output_type = t.out},
                                         nullptr);
        ASSERT_TRUE(s.ok()) << what << ": " << s.to_string();
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        expect_linear(dy.download(), widen(x), widen(w), {}, {},
                      with_bias ? widen(bias) : std::vector<double>{}, m, n, k, data_type(t.out),
                      what);
      }
    }
  }

  // FP8: the sums everywhere; per-row scales only where the switch gives them (Hopper: no).
  EXPECT_FALSE((*blas)->fp8_linear_supported());
  const OuterVecScales on(true);
  auto blackwell = cuda::BlasLt::create(1 << 20);
  ASSERT_TRUE(blackwell.ok());
  EXPECT_TRUE((*blackwell)->fp8_linear_supported());
  const std::int64_t n = 96, k = 256;
  for (const std::int64_t m : {1, 33}) {
    const Matrix x = random_matrix(CUDA_R_8F_E4M3, k, m, k, rng);  // [m, k] row-major
    const Matrix w = random_matrix(CUDA_R_8F_E4M3, k, n, k, rng);  // [n, k]
    const std::vector<float> xs =
        gpu_test::random_vector(static_cast<std::size_t>(m), rng, 1.0f / 512, 1.0f / 64);
    const std::vector<float> ws =
        gpu_test::random_vector(static_cast<std::size_t>(n), rng, 1.0f / 4096, 1.0f / 256);
    const DeviceVector<float> dxs(xs), dws(ws);
    DeviceVector<float> sums(static_cast<std::size_t>(m * n));
    ASSERT_TRUE((*blas)
                    ->linear_fp8_sums(
                        {.x = x.data(), .w = w.data(), .sums = sums.data(), .m = m, .n = n, .k = k},
                        nullptr)
                    .ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    expect_linear(sums.download(), x.values, w.values, {}, {}, {}, m, n, k, CUDA_R_32F,
                  "fp8 sums m=" + std::to_string(m));
    for (const ScalarType out : {ScalarType::kBF16, ScalarType::kF16}) {
      const std::vector<float> bias =
          gpu_test::round_to(gpu_test::random_vector(static_cast<std::size_t>(n), rng), out);
      gpu_test::DeviceArray db(bias, out), dy(static_cast<std::size_t>(m * n), out);
      dy.poison();
      const Status s = (*blackwell)
                           ->linear_fp8({.x = x.data(),
                                         .x_scales = dxs.data(),
                                         .w = w.data(),
                                         .w_scales = dws.data(),
                                         .bias = db.data(),
                                         .y = dy.data(),
                                         .m = m,
                                         .n = n,
                                         .k = k,
                                         .output_type = out},
                                        nullptr);
      ASSERT_TRUE(s.ok()) << s.to_string();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      expect_linear(
          dy.download(), x.values, w.values, widen(xs), widen(ws), widen(bias), m, n, k,
          data_type(out),
          std::string("fp8 scaled ") + gpu_test::name_of(out) + " m=" + std::to_string(m));
    }
  }
}

}  // namespace
}  // namespace pagoda
