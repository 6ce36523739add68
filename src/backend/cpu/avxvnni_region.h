// Functions between PAGODA_AVXVNNI_BEGIN and PAGODA_AVXVNNI_END are compiled for AVX-VNNI (their
// callers pick them only where the CPU has it). GCC takes `#pragma GCC target`; Clang (the
// fuzzers' build) ignores it and takes the target attribute pushed onto every function instead.
#pragma once

#if defined(__clang__)
#define PAGODA_AVXVNNI_BEGIN \
  _Pragma("clang attribute push(__attribute__((target(\"avxvnni\"))), apply_to = function)")
#define PAGODA_AVXVNNI_END _Pragma("clang attribute pop")
#else
#define PAGODA_AVXVNNI_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"avxvnni\")")
#define PAGODA_AVXVNNI_END _Pragma("GCC pop_options")
#endif
