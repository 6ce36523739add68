// The previous-tokens gather's kernel source, compiled as host C++ for the CPU emulation.
#include "kernels/embedding/previous_tokens.cu"
