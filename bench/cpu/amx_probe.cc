// Whether this core's AMX-INT8 tiles can run the int16 contract, and how fast: the measurements
// behind docs/perf/cpu.md, "AMX: the int16 contract in two int8 tile products".
//
//   pagoda_amx_probe            (x86-64 Linux with AMX-INT8; about 5 s; exits 1 without AMX)
//
// 1. The kernel's permission for the tile state (arch_prctl ARCH_REQ_XCOMP_PERM), which Linux
//    requires before the first tile instruction.
// 2. Exactness: the contract's block dot sum_c q[c] * qw[c] (q int16, qw a weight code in
//    -128..127) as 256 * (q >> 8) . qw + (q & 255) . qw, the first term one tdpbssd (s8 x s8),
//    the second one tdpbusd (u8 x s8), both exact in int32: 16 rows of x against 16 weight
//    rows over one 32-column block (K = 32 tiles), on random and extreme values, against a
//    scalar int64 sum.
// 3. Peak multiply-adds per cycle of tdpbssd with full (K = 64) and half (K = 32, one contract
//    block) tiles: four independent accumulator tiles in a 2 x 2 blocking, on 1 thread, set
//    against the clock from a chain of dependent multiplies.
// 4. What a kernel pays around each product: tile loads and stores, tilezero, a dependent chain
//    of products into one C, and zero + product + store of one C in a loop (K = 32).
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>

#include "backend/cpu/amx_tile_config.h"
#include "probe_timing.h"

namespace {

constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

using pagoda::cpu::amx::TileConfig;

// Tiles 0-3: C (16 x 16 int32); 4-5: A (16 rows of x, k bytes); 6-7: B (k / 4 rows of 16 x 4
// bytes: B[k / 4][4 n + k % 4] = w[n][k]).
void configure(int k) {
  TileConfig config;
  for (int t = 0; t < 4; ++t) {
    config.rows[t] = 16;
    config.colsb[t] = 64;
  }
  for (int t = 4; t < 6; ++t) {
    config.rows[t] = 16;
    config.colsb[t] = static_cast<std::uint16_t>(k);
  }
  for (int t = 6; t < 8; ++t) {
    config.rows[t] = static_cast<std::uint8_t>(k / 4);
    config.colsb[t] = 64;
  }
  pagoda::cpu::amx::load_tile_config(config);
}

using pagoda::bench::best_seconds;
using pagoda::bench::clock_hz;

// 2. Mismatches of the two-product dot against the scalar one over `trials` random blocks.
int exactness_mismatches(int trials) {
  constexpr int kK = 32;
  configure(kK);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> x_dist(-32767, 32767);
  std::uniform_int_distribution<int> w_dist(-128, 127);
  alignas(64) std::int16_t x[16][kK];
  alignas(64) std::int8_t x_high[16][kK];
  alignas(64) std::uint8_t x_low[16][kK];
  alignas(64) std::int8_t w[16][kK];
  alignas(64) std::int8_t b[kK / 4][64];
  alignas(64) std::int32_t high[16][16];
  alignas(64) std::int32_t low[16][16];
  int mismatches = 0;
  for (int trial = 0; trial < trials; ++trial) {
    for (int i = 0; i < 16; ++i) {
      for (int c = 0; c < kK; ++c) {
        // Every fourth trial at the extremes the contract allows: |q| = 32767, codes -128 / 127.
        const bool extreme = trial % 4 == 3;
        x[i][c] = static_cast<std::int16_t>(extreme ? ((i + c) % 2 ? 32767 : -32767) : x_dist(rng));
        w[i][c] = static_cast<std::int8_t>(extreme ? ((i * c) % 2 ? 127 : -128) : w_dist(rng));
        x_high[i][c] = static_cast<std::int8_t>(x[i][c] >> 8);
        x_low[i][c] = static_cast<std::uint8_t>(x[i][c] & 0xFF);
      }
    }
    for (int n = 0; n < 16; ++n) {
      for (int c = 0; c < kK; ++c) b[c / 4][4 * n + c % 4] = w[n][c];
    }
    _tile_zero(0);
    _tile_zero(1);
    _tile_loadd(4, x_high, kK);
    _tile_loadd(5, x_low, kK);
    _tile_loadd(6, b, 64);
    _tile_dpbssd(0, 4, 6);
    _tile_dpbusd(1, 5, 6);
    _tile_stored(0, high, 64);
    _tile_stored(1, low, 64);
    for (int i = 0; i < 16; ++i) {
      for (int n = 0; n < 16; ++n) {
        std::int64_t want = 0;
        for (int c = 0; c < kK; ++c) want += static_cast<std::int64_t>(x[i][c]) * w[n][c];
        const std::int64_t got = 256 * static_cast<std::int64_t>(high[i][n]) + low[i][n];
        mismatches += got != want;
      }
    }
  }
  return mismatches;
}

// 3. tdpbssd per second with k-byte tiles: four independent accumulators, 2 x 2 over A and B.
double dp_per_second(int k) {
  configure(k);
  alignas(64) static std::int8_t a[16][64];
  alignas(64) static std::int8_t b[16][64];
  std::memset(a, 1, sizeof(a));
  std::memset(b, 1, sizeof(b));
  constexpr long kIterations = 2'000'000;
  const double seconds = best_seconds([] {
    for (int t = 0; t < 4; ++t) {
      switch (t) {
        case 0: _tile_zero(0); break;
        case 1: _tile_zero(1); break;
        case 2: _tile_zero(2); break;
        default: _tile_zero(3); break;
      }
    }
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a, 64);
    _tile_loadd(6, b, 64);
    _tile_loadd(7, b, 64);
    for (long i = 0; i < kIterations; ++i) {
      _tile_dpbssd(0, 4, 6);
      _tile_dpbssd(1, 4, 7);
      _tile_dpbssd(2, 5, 6);
      _tile_dpbssd(3, 5, 7);
    }
  });
  return 4.0 * kIterations / seconds;
}

// 4. Cycles per instruction of the tile moves and of a dependent chain of products (K = 32):
// what a kernel pays around each product.
struct TileCosts {
  double load_a, load_b, store_c, zero, product_latency, zero_product_store;
};

TileCosts tile_costs(double hz) {
  configure(32);
  alignas(64) static std::int8_t src[16][64];
  alignas(64) static std::int32_t dst[16][16];
  constexpr long kIterations = 1'000'000;
  auto cycles = [&](auto&& body, int per_iteration) {
    return best_seconds([&] {
             for (long i = 0; i < kIterations; ++i) body();
           }) *
           hz / (static_cast<double>(kIterations) * per_iteration);
  };
  TileCosts c{};
  c.load_a = cycles(
      [] {
        _tile_loadd(4, src, 64);
        _tile_loadd(5, src, 64);
      },
      2);
  c.load_b = cycles(
      [] {
        _tile_loadd(6, src, 64);
        _tile_loadd(7, src, 64);
      },
      2);
  _tile_zero(0);
  c.store_c = cycles([] { _tile_stored(0, dst, 64); }, 1);
  c.zero = cycles(
      [] {
        _tile_zero(0);
        _tile_zero(1);
      },
      2);
  _tile_loadd(4, src, 64);
  _tile_loadd(6, src, 64);
  c.product_latency = cycles([] { _tile_dpbssd(0, 4, 6); }, 1);
  c.zero_product_store = cycles(
      [] {
        _tile_zero(0);
        _tile_dpbssd(0, 4, 6);
        _tile_stored(0, dst, 64);
      },
      1);
  return c;
}

}  // namespace

int main() {
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
    std::printf("amx: no permission for the tile state (no AMX, or a kernel before 5.16)\n");
    return 1;
  }
  std::printf("amx: tile state permitted\n");
  const int mismatches = exactness_mismatches(400);
  std::printf(
      "int16 contract as 256 * tdpbssd(x >> 8) + tdpbusd(x & 255): %d mismatches in "
      "400 x 256 block dots\n",
      mismatches);
  const double hz = clock_hz();
  std::printf("clock (dependent imul): %.2f GHz\n", hz / 1e9);
  for (int k : {64, 32}) {
    const double ops = dp_per_second(k);
    const double macs = 16.0 * 16.0 * k;
    std::printf(
        "tdpbssd, K = %d: %.1f cycles per op, %.0f int8 multiply-adds per cycle, %.0f "
        "int16 contract ones (two ops each; vpdpwssd zmm at 2 a cycle: 64)\n",
        k, hz / ops, ops * macs / hz, ops * macs / hz / 2);
  }
  const TileCosts c = tile_costs(hz);
  std::printf(
      "cycles per instruction, K = 32 tiles: tileloadd A (16 x 32 B) %.1f, B (8 x 64 B) "
      "%.1f, tilestored C (16 x 64 B) %.1f, tilezero %.1f; tdpbssd into one C (a "
      "dependent chain) %.1f; tilezero + tdpbssd + tilestored of one C %.1f\n",
      c.load_a, c.load_b, c.store_c, c.zero, c.product_latency, c.zero_product_store);
  _tile_release();
  return mismatches == 0 ? 0 : 1;
}
