// cuBLASLt on host memory for the CPU emulation (kernels/emulation/): the calls the CUDA backend
// makes (src/backend/cuda/blas_lt.cc: the handle, a matmul descriptor, matrix layouts, a
// preference, the heuristic and cublasLtMatmul), so its dense products run where there is no GPU
// and no libcublasLt is linked.
//
// The product is exact, then rounded once: the operands are widened to double once per call, their
// products are exact there and summed in double (OpenBLAS's dgemm), alpha, the scales, beta C and
// the bias are applied in double, and the result is rounded once to D's type. A GPU sums in fp32
// (FP8 tensor cores in a narrower accumulator promoted every few k-steps), so its last bits differ,
// within the bounds the GPU tests state.
//
// It refuses what CUDA 13's cuBLASLt on Hopper refuses, as its documentation and our GPU runs
// have it, so what runs here runs there:
//   - inconsistent shapes (op(A) m x k, op(B) k x n, C and D m x n), ld < rows, null operands,
//     alpha or beta, C with beta != 0, a BIAS epilogue without its pointer, scale pointers on
//     16/32-bit operands, an in-place C = D with another layout, an algorithm found for other
//     types: CUBLAS_STATUS_INVALID_VALUE;
//   - type combinations without kernels (A and B of different types, 16-bit in and the other
//     16-bit type out, FP8 out); FP8 other than TN, or with k, an ld or a pointer off 16 bytes:
//     CUBLAS_STATUS_NOT_SUPPORTED;
//   - OUTER_VEC_32F scale vectors: CUBLAS_STATUS_INVALID_VALUE from the heuristic and the product,
//     which is what Hopper answered in GPU run 15, unless cublaslt_emulation.h's switch says this
//     device has them (Blackwell). Callers then take the path they take on an H100.
// What it does not emulate (other compute types, epilogues, attributes, orders, batches) it
// refuses with CUBLAS_STATUS_NOT_SUPPORTED rather than compute something else.
//
// A product is issued on its stream (emulation::submit): the descriptors, pointers and the host
// scalars alpha and beta are taken at the call, as cuBLASLt's host pointer mode does, and the
// operands, bias and device scales are read when the work runs (at a sync, or a graph's replay).
#include "kernels/emulation/cublaslt_emulation.h"

#include <cblas.h>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>
#include <vector>

#include "kernels/emulation/cuda_emulation.h"

namespace pagoda::emulation {
namespace {

std::atomic<int> g_outer_vec_override{-1};  // -1: the environment decides

}  // namespace

bool cublaslt_outer_vec_scales() {
  const int forced = g_outer_vec_override.load();
  if (forced >= 0) return forced == 1;
  static const bool from_env = [] {
    const char* env = std::getenv("PAGODA_EMULATED_CUBLASLT_OUTER_VEC");
    return env != nullptr && std::strcmp(env, "1") == 0;
  }();
  return from_env;
}

void set_cublaslt_outer_vec_scales(bool supported) {
  g_outer_vec_override.store(supported ? 1 : 0);
}

}  // namespace pagoda::emulation

struct cublasLtContext {};

namespace {

// The descriptors live in the header's semi-opaque storage.
struct Desc {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale_type = CUDA_R_32F;
  cublasOperation_t trans_a = CUBLAS_OP_N;
  cublasOperation_t trans_b = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  cublasLtMatmulMatrixScale_t a_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  cublasLtMatmulMatrixScale_t b_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  const float* a_scale = nullptr;  // device; a scalar, or [m] with OUTER_VEC_32F
  const float* b_scale = nullptr;  // device; a scalar, or [n] with OUTER_VEC_32F
};

struct Layout {
  cudaDataType_t type = CUDA_R_32F;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld = 0;  // column-major: element (i, j) at i + j * ld
};

struct Preference {
  std::uint64_t max_workspace_bytes = 0;
};

static_assert(sizeof(Desc) <= sizeof(cublasLtMatmulDescOpaque_t));
static_assert(sizeof(Layout) <= sizeof(cublasLtMatrixLayoutOpaque_t));
static_assert(sizeof(Preference) <= sizeof(cublasLtMatmulPreferenceOpaque_t));
static_assert(std::is_trivially_copyable_v<Desc> && std::is_trivially_copyable_v<Layout>);

template <typename T, typename Opaque>
T& view(Opaque* opaque) {
  return *std::launder(reinterpret_cast<T*>(opaque));
}

template <typename T, typename Opaque>
cublasStatus_t create(Opaque** out, const T& value) {
  if (out == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* storage = new (std::nothrow) Opaque{};
  if (storage == nullptr) return CUBLAS_STATUS_ALLOC_FAILED;
  new (storage) T(value);
  *out = storage;
  return CUBLAS_STATUS_SUCCESS;
}

// An attribute's value, when `size` is its type's.
template <typename V>
bool read_value(const void* buf, std::size_t size, V* out) {
  if (buf == nullptr || size != sizeof(V)) return false;
  std::memcpy(out, buf, sizeof(V));
  return true;
}

bool is_fp8(cudaDataType_t type) {
  return type == CUDA_R_8F_E4M3;
}

std::int64_t size_of(cudaDataType_t type) {
  switch (type) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    default: return 1;
  }
}

// Everything a product depends on but the pointers: copied at the call.
struct Problem {
  Desc desc;
  Layout a, b, c, d;

  std::int64_t m() const { return d.rows; }
  std::int64_t n() const { return d.cols; }
  std::int64_t k() const { return desc.trans_a == CUBLAS_OP_N ? a.cols : a.rows; }
  bool fp8() const { return is_fp8(a.type) || is_fp8(b.type); }
  bool outer_vec() const {
    return desc.a_scale_mode == CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F ||
           desc.b_scale_mode == CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  }
};

// Whether cuBLASLt has an algorithm for `p` (the heuristic's and the product's checks).
cublasStatus_t check(const Problem& p) {
  const Desc& s = p.desc;
  const bool a_n = s.trans_a == CUBLAS_OP_N, b_n = s.trans_b == CUBLAS_OP_N;
  const std::int64_t a_rows = a_n ? p.a.rows : p.a.cols;
  const std::int64_t b_rows = b_n ? p.b.rows : p.b.cols;
  const std::int64_t b_cols = b_n ? p.b.cols : p.b.rows;
  if (a_rows != p.m() || b_rows != p.k() || b_cols != p.n() || p.c.rows != p.m() ||
      p.c.cols != p.n()) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  for (const Layout* l : {&p.a, &p.b, &p.c, &p.d}) {
    if (l->ld < std::max<std::int64_t>(1, l->rows)) return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (p.c.type != p.d.type || is_fp8(p.d.type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (p.fp8()) {
    // FP8 kernels take only E4M3 x E4M3 here, A transposed and B not ("TN"), 16-byte rows.
    if (!is_fp8(p.a.type) || !is_fp8(p.b.type) || s.trans_a != CUBLAS_OP_T ||
        s.trans_b != CUBLAS_OP_N || p.k() % 16 != 0) {
      return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    for (const Layout* l : {&p.a, &p.b, &p.c, &p.d}) {
      if (l->ld * size_of(l->type) % 16 != 0) return CUBLAS_STATUS_NOT_SUPPORTED;
    }
  } else if (p.a.type != p.b.type || (p.d.type != p.a.type && p.d.type != CUDA_R_32F)) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (p.outer_vec()) {
    // Hopper with CUDA 13 has no such algorithm: its heuristic answered INVALID_VALUE (run 15).
    if (!p.fp8() || s.a_scale_mode != s.b_scale_mode ||
        !pagoda::emulation::cublaslt_outer_vec_scales()) {
      return CUBLAS_STATUS_INVALID_VALUE;
    }
  } else if (!p.fp8() && (s.a_scale != nullptr || s.b_scale != nullptr)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}

// What an algorithm is chosen for besides the shape; kept in the algorithm's first words so one
// found for other types or transposes is refused by cublasLtMatmul.
constexpr std::uint64_t kAlgoTag = 0x7061676f64614c74;  // "pagodaLt"

std::uint64_t signature(const Problem& p) {
  const Desc& s = p.desc;
  std::uint64_t v = 0;
  for (const std::uint64_t field :
       {std::uint64_t(p.a.type), std::uint64_t(p.b.type), std::uint64_t(p.d.type),
        std::uint64_t(s.trans_a), std::uint64_t(s.trans_b), std::uint64_t(s.epilogue),
        std::uint64_t(s.a_scale_mode), std::uint64_t(s.b_scale_mode)}) {
    v = v * 131 + field;
  }
  return v;
}

const std::array<double, 256>& e4m3_values() {
  // E4M3 "fn": bias 7, no infinities, S.1111.111 is NaN.
  static const std::array<double, 256> table = [] {
    std::array<double, 256> t{};
    for (int code = 0; code < 256; ++code) {
      const int exponent = (code >> 3) & 15, mantissa = code & 7;
      double v = exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(8 + mantissa, exponent - 10);
      if ((code & 127) == 127) v = std::numeric_limits<double>::quiet_NaN();
      t[static_cast<std::size_t>(code)] = code & 128 ? -v : v;
    }
    return t;
  }();
  return table;
}

template <typename T>
double widen_one(T v) {
  if constexpr (std::is_same_v<T, std::uint8_t>) {
    return e4m3_values()[v];
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else if constexpr (std::is_same_v<T, __half>) {
    return __half2float(v);
  } else {
    return v;
  }
}

// dst[t * dst_stride] = element at + t * stride of `base`, for t < count: the type's switch taken
// once per run, not per element (widening op(A) is most of a one-token product's time).
void widen(cudaDataType_t type, const void* base, std::int64_t at, std::int64_t stride,
           std::int64_t count, double* dst, std::int64_t dst_stride) {
  const auto run = [&](const auto* src) {
    for (std::int64_t t = 0; t < count; ++t) dst[t * dst_stride] = widen_one(src[at + t * stride]);
  };
  switch (type) {
    case CUDA_R_32F: return run(static_cast<const float*>(base));
    case CUDA_R_16F: return run(static_cast<const __half*>(base));
    case CUDA_R_16BF: return run(static_cast<const __nv_bfloat16*>(base));
    case CUDA_R_8F_E4M3: return run(static_cast<const std::uint8_t*>(base));
    default:
      for (std::int64_t t = 0; t < count; ++t) {
        dst[t * dst_stride] = std::numeric_limits<double>::quiet_NaN();
      }
  }
}

double load(cudaDataType_t type, const void* base, std::int64_t index) {
  double v;
  widen(type, base, index, 0, 1, &v, 0);
  return v;
}

// `v` rounded to float by round-to-odd: rounding that once more to a type of at most 22 bits of
// significand (half, bfloat16) is the correct rounding of `v` itself, not a double rounding.
float round_to_odd(double v) {
  float f = static_cast<float>(v);
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if (std::isfinite(f) && static_cast<double>(f) != v && (bits & 1) == 0) {
    f = std::nextafter(f, v > f ? std::numeric_limits<float>::infinity()
                                : -std::numeric_limits<float>::infinity());
  }
  return f;
}

void store(cudaDataType_t type, void* base, std::int64_t index, double v) {
  switch (type) {
    case CUDA_R_32F: static_cast<float*>(base)[index] = static_cast<float>(v); break;
    case CUDA_R_16F: static_cast<__half*>(base)[index] = __float2half_rn(round_to_odd(v)); break;
    case CUDA_R_16BF:
      static_cast<__nv_bfloat16*>(base)[index] = __float2bfloat16_rn(round_to_odd(v));
      break;
    default: break;
  }
}

// A product as issued: the problem, its pointers and host scalars taken at the call.
struct Product {
  Problem p;
  const void* a;
  const void* b;
  const void* c;
  void* d;
  double alpha;
  double beta;
};

// D = alpha scale_a scale_b op(A) op(B) + beta C + bias: the operands widened to double once,
// their product by OpenBLAS's dgemm (column-major, as cuBLASLt's), the epilogue in double.
void run(const Product& x) {
  const Problem& p = x.p;
  const Desc& s = p.desc;
  const std::int64_t m = p.m(), n = p.n(), k = p.k();
  if (m == 0 || n == 0) return;

  // op(A) as m x k and op(B) as k x n, both column-major with no padding.
  std::vector<double> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n));
  const bool a_n = s.trans_a == CUBLAS_OP_N, b_n = s.trans_b == CUBLAS_OP_N;
  for (std::int64_t q = 0; q < k; ++q) {
    widen(p.a.type, x.a, a_n ? q * p.a.ld : q, a_n ? 1 : p.a.ld, m,
          &a[static_cast<std::size_t>(q * m)], 1);
  }
  for (std::int64_t j = 0; j < n; ++j) {
    widen(p.b.type, x.b, b_n ? j * p.b.ld : j, b_n ? 1 : p.b.ld, k,
          &b[static_cast<std::size_t>(j * k)], 1);
  }
  std::vector<double> sums(static_cast<std::size_t>(m * n), 0.0);
  if (k > 0) {
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m),
                static_cast<blasint>(n), static_cast<blasint>(k), 1.0, a.data(),
                static_cast<blasint>(m), b.data(), static_cast<blasint>(k), 0.0, sums.data(),
                static_cast<blasint>(m));
  }

  // Per-row (alpha, A's scale) and per-column (B's scale) factors, and the bias, in D's rows.
  std::vector<double> row_factor(static_cast<std::size_t>(m), x.alpha);
  std::vector<double> col_factor(static_cast<std::size_t>(n), 1.0);
  if (p.outer_vec()) {
    for (std::int64_t i = 0; i < m; ++i) row_factor[static_cast<std::size_t>(i)] *= s.a_scale[i];
    for (std::int64_t j = 0; j < n; ++j) col_factor[static_cast<std::size_t>(j)] = s.b_scale[j];
  } else {
    const double scalar =
        (s.a_scale != nullptr ? *s.a_scale : 1.0) * (s.b_scale != nullptr ? *s.b_scale : 1.0);
    for (double& f : row_factor) f *= scalar;
  }
  std::vector<double> bias(static_cast<std::size_t>(m), 0.0);
  if (s.epilogue == CUBLASLT_EPILOGUE_BIAS) {
    // The bias is in D's type, but bfloat16 for FP8 products into fp32.
    const cudaDataType_t type = p.fp8() && p.d.type == CUDA_R_32F ? CUDA_R_16BF : p.d.type;
    widen(type, s.bias, 0, 1, m, bias.data(), 1);
  }
  for (std::int64_t j = 0; j < n; ++j) {
    for (std::int64_t i = 0; i < m; ++i) {
      double v = sums[static_cast<std::size_t>(i + j * m)] *
                 row_factor[static_cast<std::size_t>(i)] * col_factor[static_cast<std::size_t>(j)];
      // beta = 0 reads no C: D may hold anything (NaN) before.
      if (x.beta != 0.0) v += x.beta * load(p.c.type, x.c, i + j * p.c.ld);
      store(p.d.type, x.d, i + j * p.d.ld, v + bias[static_cast<std::size_t>(i)]);
    }
  }
}

bool aligned16(const void* ptr) {
  return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0;
}

}  // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasLtContext();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale_type) {
  // Plain fp32 compute (no TF32, no fast modes) with fp32 alpha and beta is what is emulated.
  if (compute != CUBLAS_COMPUTE_32F || scale_type != CUDA_R_32F) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  return create(desc, Desc{.compute = compute, .scale_type = scale_type});
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              std::size_t size) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  Desc& d = view<Desc>(desc);
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB: {
      std::int32_t op = 0;
      if (!read_value(buf, size, &op)) return CUBLAS_STATUS_INVALID_VALUE;
      if (op == CUBLAS_OP_C) return CUBLAS_STATUS_NOT_SUPPORTED;
      if (op != CUBLAS_OP_N && op != CUBLAS_OP_T) return CUBLAS_STATUS_INVALID_VALUE;
      (attr == CUBLASLT_MATMUL_DESC_TRANSA ? d.trans_a : d.trans_b) =
          static_cast<cublasOperation_t>(op);
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_EPILOGUE: {
      std::uint32_t epilogue = 0;
      if (!read_value(buf, size, &epilogue)) return CUBLAS_STATUS_INVALID_VALUE;
      if (epilogue != CUBLASLT_EPILOGUE_DEFAULT && epilogue != CUBLASLT_EPILOGUE_BIAS) {
        return CUBLAS_STATUS_NOT_SUPPORTED;
      }
      d.epilogue = static_cast<cublasLtEpilogue_t>(epilogue);
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return read_value(buf, size, &d.bias) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
    case CUBLASLT_MATMUL_DESC_A_SCALE_MODE:
    case CUBLASLT_MATMUL_DESC_B_SCALE_MODE: {
      std::int32_t mode = 0;
      if (!read_value(buf, size, &mode)) return CUBLAS_STATUS_INVALID_VALUE;
      if (mode < 0 || mode >= CUBLASLT_MATMUL_MATRIX_SCALE_END) return CUBLAS_STATUS_INVALID_VALUE;
      if (mode != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F &&
          mode != CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F) {
        return CUBLAS_STATUS_NOT_SUPPORTED;
      }
      (attr == CUBLASLT_MATMUL_DESC_A_SCALE_MODE ? d.a_scale_mode : d.b_scale_mode) =
          static_cast<cublasLtMatmulMatrixScale_t>(mode);
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER:
      return read_value(buf, size, &d.a_scale) ? CUBLAS_STATUS_SUCCESS
                                               : CUBLAS_STATUS_INVALID_VALUE;
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER:
      return read_value(buf, size, &d.b_scale) ? CUBLAS_STATUS_SUCCESS
                                               : CUBLAS_STATUS_INVALID_VALUE;
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type,
                                          std::uint64_t rows, std::uint64_t cols, std::int64_t ld) {
  if (type != CUDA_R_32F && type != CUDA_R_16F && type != CUDA_R_16BF && type != CUDA_R_8F_E4M3) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (rows > kMax || cols > kMax || ld < 0) return CUBLAS_STATUS_INVALID_VALUE;
  return create(layout, Layout{.type = type,
                               .rows = static_cast<std::int64_t>(rows),
                               .cols = static_cast<std::int64_t>(cols),
                               .ld = ld});
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* preference) {
  return create(preference, Preference{});
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  delete preference;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, std::size_t size) {
  if (preference == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (attr != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) return CUBLAS_STATUS_NOT_SUPPORTED;
  return read_value(buf, size, &view<Preference>(preference).max_workspace_bytes)
             ? CUBLAS_STATUS_SUCCESS
             : CUBLAS_STATUS_INVALID_VALUE;
}

// One algorithm, needing no workspace, wherever check() finds the problem supported.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t preference, int requested,
                                              cublasLtMatmulHeuristicResult_t* results,
                                              int* returned) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (desc == nullptr || a == nullptr || b == nullptr || c == nullptr || d == nullptr ||
      preference == nullptr || requested <= 0 || results == nullptr || returned == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  *returned = 0;
  const Problem p{view<Desc>(desc), view<Layout>(a), view<Layout>(b), view<Layout>(c),
                  view<Layout>(d)};
  if (const cublasStatus_t status = check(p); status != CUBLAS_STATUS_SUCCESS) return status;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].algo.data[0] = kAlgoTag;
  results[0].algo.data[1] = signature(p);
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* a, cublasLtMatrixLayout_t a_layout, const void* b,
                              cublasLtMatrixLayout_t b_layout, const void* beta, const void* c,
                              cublasLtMatrixLayout_t c_layout, void* d,
                              cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t* algo,
                              void* /*workspace*/, std::size_t /*workspace_bytes*/,
                              cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (desc == nullptr || a_layout == nullptr || b_layout == nullptr || c_layout == nullptr ||
      d_layout == nullptr || alpha == nullptr || beta == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  Product x{.p = {view<Desc>(desc), view<Layout>(a_layout), view<Layout>(b_layout),
                  view<Layout>(c_layout), view<Layout>(d_layout)},
            .a = a,
            .b = b,
            .c = c,
            .d = d,
            .alpha = *static_cast<const float*>(alpha),
            .beta = *static_cast<const float*>(beta)};
  const Problem& p = x.p;
  if (const cublasStatus_t status = check(p); status != CUBLAS_STATUS_SUCCESS) return status;
  // Without an algorithm cuBLASLt runs its own heuristic; with one it must be for these types.
  if (algo != nullptr && (algo->data[0] != kAlgoTag || algo->data[1] != signature(p))) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const bool reads_c = x.beta != 0.0;
  if (a == nullptr || b == nullptr || d == nullptr || (reads_c && c == nullptr) ||
      (p.desc.epilogue == CUBLASLT_EPILOGUE_BIAS && p.desc.bias == nullptr) ||
      (p.outer_vec() && (p.desc.a_scale == nullptr || p.desc.b_scale == nullptr))) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (c == d && (p.c.ld != p.d.ld)) return CUBLAS_STATUS_INVALID_VALUE;
  if (p.fp8() && !(aligned16(a) && aligned16(b) && aligned16(d) && (!reads_c || aligned16(c)))) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  pagoda::emulation::submit(stream, [x] { run(x); });
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
