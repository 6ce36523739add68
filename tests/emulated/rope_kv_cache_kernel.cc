// RoPE + KV-cache append's kernel source, compiled as host C++ for the CPU emulation.
#include "kernels/rope/rope_kv_cache.cu"
