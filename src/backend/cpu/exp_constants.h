// The constants of the vectorized exp (exp256 in exp_avx2.h, exp512 in exp_avx512.h), in one
// place so both widths compute the same function.
//
// e^x = 2^n * e^r with n = round(x / ln 2) and |r| <= ln(2) / 2; e^r from its Taylor series to
// r^7 (truncation error < 1e-8 relative at |r| = 0.347). ln 2 is split in a high part exact in
// float and a low remainder so r keeps full precision for large |x|. Inputs are clamped to the
// range where 2^n is a normal float: below, the result is 2^-126 instead of 0 or a subnormal.
#pragma once

namespace pagoda::cpu::exp_constants {

inline constexpr float kMinInput = -87.3f;
inline constexpr float kMaxInput = 88.3f;
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2High = 0.693359375f;
inline constexpr float kLn2Low = -2.12194440e-4f;
/// Taylor coefficients of e^r, highest power first: 1/7!, 1/6!, ..., 1/1!, 1/0!.
inline constexpr float kTaylor[8] = {1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f,
                                     1.0f / 6.0f,    0.5f,          1.0f,          1.0f};

}  // namespace pagoda::cpu::exp_constants
