// Launchers of the emulation's own test kernels (cuda_emulation_kernels.cc).
#pragma once

#include <cstdint>

namespace pagoda::emulated_test {

/// d (16x8, row-major) = c + a (16x16, row-major) b (16x8, row-major), 16-bit inputs as bits.
void emulated_mma(bool bf16, const std::uint16_t* a, const std::uint16_t* b, const float* c,
                  float* d);
/// out[lane * 4 + i]: register i of `lane` after ldmatrix .x4 (.trans) of a 16x16 tile.
void emulated_ldmatrix(bool trans, const std::uint16_t* tile, std::uint32_t* out);
/// Two warps of 64 threads, value 100 warp + lane each: out[(warp * 32 + lane) * 4 + i] for
/// shfl_xor 5, shfl 7, shfl lane + 1 within 8, shfl_down 3.
void emulated_shuffles(int* out);
/// Two warps of 64 threads, lane l of warp w voting (7 l + w) % 5 == 2: out[(w * 32 + l) * 4 + i]
/// for __ballot_sync, __ffs and __clz of the ballot, __any_sync.
void emulated_votes(unsigned* out);
/// cub::BlockScan (the emulation's) over 128 threads, twice on the same storage: exclusive[r * 128
/// + t] and total[r] of round r's inputs in[r * 128 + t].
void emulated_block_scan(const int* in, int* exclusive, int* total);
/// A shuffle with half the warp in its mask, which the emulation refuses.
void emulated_partial_mask_shuffle(int* out);
/// `blocks` (even) CTAs of one warp, all `done` zero before: CTA i sets done[i], then
/// seen[i] = done[i ^ 1].
void emulated_partner_done(int blocks, int* done, int* seen);
/// `blocks` CTAs of one warp; out[block] = what lane 31 read of lane 0's cp.async of src[0].
void emulated_copy_then_read(bool synced, int blocks, const std::uint32_t* src, std::uint32_t* out);

}  // namespace pagoda::emulated_test
