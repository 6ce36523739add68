// The AMX palette-1 tile configuration, shared by the AMX kernel (matmul_int16_amx.cc) and its
// probe (bench/cpu/amx_probe.cc). Include only from translation units built with -mamx-tile.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace pagoda::cpu::amx {

/// Tile t has rows[t] rows of colsb[t] bytes; unused tiles stay zero.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

/// ldtilecfg of `config`. GCC 12 does not model ldtilecfg as reading all 64 bytes and dropped
/// the stores that filled the struct (a zero configuration: #UD on the first tile instruction);
/// the barrier makes them land.
inline void load_tile_config(const TileConfig& config) {
  asm volatile("" : : "r"(&config) : "memory");
  _tile_loadconfig(&config);
}

}  // namespace pagoda::cpu::amx
