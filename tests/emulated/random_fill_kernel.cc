// The dummy weights' uniform fill kernel source, compiled as host C++ for the CPU emulation.
#include "src/backend/cuda/random_fill.cu"
