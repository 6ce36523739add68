// Helpers of the emulated cuBLASLt's tests (cublaslt_emulation_test.cc,
// cublaslt_refusals_test.cc): matrices of every type on the device with their float64 values,
// the calls blas_lt.cc makes, and the float64 check of D.
#pragma once

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
#include "kernels/emulation/cublaslt_emulation.h"
#include "model/dequantize.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda::cublaslt_test {

using cuda::ScalarType;
using gpu_test::DeviceVector;

inline constexpr std::uint8_t kFp8NaN = 0x7F;

inline ScalarType scalar_type(cudaDataType_t type) {
  return type == CUDA_R_32F ? ScalarType::kF32
                            : (type == CUDA_R_16F ? ScalarType::kF16 : ScalarType::kBF16);
}

inline const char* type_name(cudaDataType_t type) {
  return type == CUDA_R_8F_E4M3 ? "e4m3" : gpu_test::name_of(scalar_type(type));
}

// Half an ulp of `type` at |v|, plus half of f16's subnormal spacing where that is larger.
inline double rounding(cudaDataType_t type, double v) {
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

inline std::size_t element_bytes(cudaDataType_t type) {
  return type == CUDA_R_8F_E4M3 ? 1 : cuda::scalar_type_size(scalar_type(type));
}

inline Matrix random_matrix(cudaDataType_t type, std::int64_t rows, std::int64_t cols,
                            std::int64_t ld, std::mt19937& rng) {
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
inline std::vector<double> download(const Matrix& d) {
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
inline Call call_on(const Matrix& a, const Matrix& b, const Matrix& c, const Matrix& d,
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
inline Outcome issue(const Call& call, cudaStream_t stream = nullptr) {
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

// D after `call` in float64, each element checked against the bound cublaslt_emulation_test.cc's
// header states.
inline void expect_matches_float64(const Call& call, const Matrix& a, const Matrix& b,
                                   const Matrix& c, const Matrix& d, const Epilogue& e,
                                   const std::string& what) {
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
inline Bias random_bias(cudaDataType_t type, std::int64_t m, std::mt19937& rng) {
  Matrix v = random_matrix(type, m, 1, m, rng);
  return {std::move(v.values), std::move(v.bytes)};
}

// The switch back off at the end of a test that turned it on.
struct OuterVecScales {
  explicit OuterVecScales(bool on) { emulation::set_cublaslt_outer_vec_scales(on); }
  ~OuterVecScales() { emulation::set_cublaslt_outer_vec_scales(false); }
};

}  // namespace pagoda::cublaslt_test
