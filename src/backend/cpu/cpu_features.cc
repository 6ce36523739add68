#include "backend/cpu/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace pagoda::cpu {

namespace {

enum class Isa { kBaseline, kAvx2, kAvx512, kAvx512Vnni };

#if defined(__x86_64__) || defined(__i386__)
// CPUID leaf 1, ECX bit 29 (Clang before 15 has no "f16c" for __builtin_cpu_supports).
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}
#endif

Isa detect() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())) {
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

bool cpu_has_amx_int8() {
  static const bool usable = [] {
#if defined(__x86_64__) && defined(__linux__)
    if (!cpu_has_avx512_vnni()) return false;
    const char* off = std::getenv("PAGODA_CPU_AMX");
    if (off != nullptr && std::string_view(off) == "0") return false;
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid_max(0, nullptr) < 7) return false;
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    constexpr unsigned kAmxTile = 1u << 24, kAmxInt8 = 1u << 25;
    if ((edx & kAmxTile) == 0 || (edx & kAmxInt8) == 0) return false;
    // Linux hands out the 8 KiB tile state only on request (XFEATURE_XTILEDATA = 18).
    constexpr long kArchReqXcompPerm = 0x1023;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, 18) == 0;
#else
    return false;
#endif
  }();
  return usable;
}

namespace {
std::atomic<CpuActivations>& activations() {
  static std::atomic<CpuActivations> asked{[] {
    const char* value = std::getenv("PAGODA_CPU_ACTIVATIONS");
    const std::string_view setting = value != nullptr ? value : "";
    if (setting == "int8") return CpuActivations::kInt8;
    const char* int16 = std::getenv("PAGODA_CPU_INT16");
    if (setting == "fp32" || (int16 != nullptr && std::string_view(int16) == "0")) {
      return CpuActivations::kFp32;
    }
    return CpuActivations::kInt16;
  }()};
  return asked;
}
}  // namespace

bool cpu_int16_activations() {
  return activations().load(std::memory_order_relaxed) != CpuActivations::kFp32 && cpu_has_avx2();
}

bool cpu_int8_activations() {
  return activations().load(std::memory_order_relaxed) == CpuActivations::kInt8 && cpu_has_avx2();
}

CpuActivations cpu_activations() {
  return activations().load(std::memory_order_relaxed);
}

void set_cpu_activations(CpuActivations asked) {
  activations().store(asked, std::memory_order_relaxed);
}

namespace {

std::atomic<bool>& direct_vnni() {
  static std::atomic<bool> on{[] {
    const char* value = std::getenv("PAGODA_CPU_VNNI_DIRECT");
    return value == nullptr || std::string_view(value) != "0";
  }()};
  return on;
}
}  // namespace

bool cpu_int16_avx_vnni() {
  static const bool enabled = [] {
    const char* off = std::getenv("PAGODA_CPU_AVX_VNNI");
    if (off != nullptr && std::string_view(off) == "0") return false;
#if defined(__x86_64__) && defined(__linux__)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid_max(0, nullptr) < 7) return false;
    __cpuid_count(7, 1, eax, ebx, ecx, edx);
    return cpu_has_avx2() && (eax & (1u << 4)) != 0;
#else
    return false;
#endif
  }();
  return enabled;
}

bool cpu_int16_direct_vnni() {
  return direct_vnni().load(std::memory_order_relaxed);
}

void set_cpu_int16_direct_vnni(bool on) {
  direct_vnni().store(on, std::memory_order_relaxed);
}

bool cpu_interleave_weights(std::int64_t max_num_seqs) {
  // The panels' readers are the int16 kernels; the fp32 ones would deinterleave every call.
  if (!cpu_has_avx2() || cpu_has_amx_int8() || !cpu_int16_activations()) return false;
  const char* value = std::getenv("PAGODA_CPU_INTERLEAVE");
  const std::string_view setting = value != nullptr ? value : "";
  if (setting == "0") return false;
  return cpu_has_avx512_vnni() || setting == "1" || max_num_seqs == 1 ||
         (cpu_int8_activations() && cpu_int16_avx_vnni());
}

}  // namespace pagoda::cpu
