// The part of CUB the kernels use, for their host builds on the CPU emulation (cuda_emulation.h):
// cub::BlockScan over a 1-D block, ExclusiveSum with the block's total. The real one is device
// code only. Like CUB's, the temporary storage may be reused only after a __syncthreads past the
// scan: it ends without one, so a kernel that forgets its own barrier reads another round's values
// in the emulation's shuffled thread order.
#pragma once

#if !defined(PAGODA_CUDA_EMULATION)
#error "cub_emulation.h is for host builds of kernel sources (PAGODA_CUDA_EMULATION)"
#endif

#include <cstdio>
#include <cstdlib>

namespace cub {

template <typename T, int kBlockDimX>
class BlockScan {
 public:
  struct TempStorage {
    T values[kBlockDimX];
  };

  explicit BlockScan(TempStorage& storage) : storage_(storage) {}

  /// output = the sum of the inputs of the threads before this one; block_aggregate = the sum of
  /// all kBlockDimX inputs. Every thread of the block must call.
  void ExclusiveSum(T input, T& output, T& block_aggregate) {
    if (blockDim.x != kBlockDimX || blockDim.y != 1 || blockDim.z != 1) {
      std::fprintf(stderr, "cuda emulation: cub::BlockScan<%d> in a block of %u x %u x %u\n",
                   kBlockDimX, blockDim.x, blockDim.y, blockDim.z);
      std::abort();
    }
    const int me = static_cast<int>(threadIdx.x);
    storage_.values[me] = input;
    __syncthreads();
    T before{};
    T total{};
    for (int t = 0; t < kBlockDimX; ++t) {
      if (t == me) before = total;
      total += storage_.values[t];
    }
    output = before;
    block_aggregate = total;
  }

 private:
  TempStorage& storage_;
};

}  // namespace cub
