#include "backend/cpu/cpu_features.h"

#include <cstdlib>
#include <string_view>

namespace pagoda::cpu {

namespace {

enum class Isa { kBaseline, kAvx2, kAvx512, kAvx512Vnni };

Isa detect() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c"))) {
    return Isa::kBaseline;
  }
  if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))) return Isa::kAvx2;
  if (__builtin_cpu_supports("avx512vnni")) return Isa::kAvx512Vnni;
  return Isa::kAvx512;
#else
  return Isa::kBaseline;
#endif
}

Isa isa() {
  static const Isa chosen = [] {
    Isa best = detect();
    const char* cap = std::getenv("PAGODA_CPU_ISA");
    if (cap != nullptr && std::string_view(cap) == "baseline") best = Isa::kBaseline;
    if (cap != nullptr && std::string_view(cap) == "avx2" && best >= Isa::kAvx512) {
      best = Isa::kAvx2;
    }
    if (cap != nullptr && std::string_view(cap) == "avx512" && best == Isa::kAvx512Vnni) {
      best = Isa::kAvx512;
    }
    return best;
  }();
  return chosen;
}

}  // namespace

bool cpu_has_avx2() {
  return isa() >= Isa::kAvx2;
}

bool cpu_has_avx512() {
  return isa() >= Isa::kAvx512;
}

bool cpu_has_avx512_vnni() {
  return isa() >= Isa::kAvx512Vnni;
}

bool cpu_int16_activations() {
  static const bool turned_off = [] {
    const char* value = std::getenv("PAGODA_CPU_INT16");
    return value != nullptr && std::string_view(value) == "0";
  }();
  return !turned_off && cpu_has_avx2();
}

}  // namespace pagoda::cpu
