#include "backend/cpu/cpu_features.h"

#include <cstdlib>
#include <string_view>

namespace pagoda::cpu {

bool cpu_has_avx2() {
  // PAGODA_CPU_BASELINE=1 forces the portable kernels, to test them on an AVX2 machine.
  static const bool has = [] {
    const char* force = std::getenv("PAGODA_CPU_BASELINE");
    if (force != nullptr && std::string_view(force) == "1") return false;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
#else
    return false;
#endif
  }();
  return has;
}

}  // namespace pagoda::cpu
