#!/usr/bin/env python3
"""The machine a peer benchmark ran on, as the reports record it (JSON on stdout).

CPU model, nproc, load average, and the x86 ISA level as detected from /proc/cpuinfo's flags,
named the way issue 24 asks results to be split: "AVX-512 + VNNI", "AVX-512" or "AVX2 only"
(plus the extensions that matter to int8/int16 kernels). Pagoda picks its kernels the same way
(src/backend/cpu/cpu_features.cc) unless PAGODA_CPU_ISA caps it; the cap in the environment is
recorded as given. Standard library only; Linux only (reads /proc).
"""
import json
import os


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def isa_level(flags):
    if not {"avx2", "fma", "f16c"} <= flags:
        return "below AVX2"
    if {"avx512f", "avx512bw"} <= flags:
        return "AVX-512 + VNNI" if "avx512_vnni" in flags else "AVX-512"
    return "AVX2 only" + (" (+ AVX-VNNI)" if "avx_vnni" in flags else "")


def pagoda_kernels(level, cap):
    """The kernel level Pagoda uses under PAGODA_CPU_ISA=cap (mirrors cpu_features.cc)."""
    order = ["below AVX2", "AVX2", "AVX-512", "AVX-512 + VNNI"]
    best = "AVX2" if level.startswith("AVX2") else level
    if cap == "baseline":
        best = "below AVX2"
    elif cap == "avx2" and order.index(best) >= order.index("AVX-512"):
        best = "AVX2"
    elif cap == "avx512" and best == "AVX-512 + VNNI":
        best = "AVX-512"
    return best


def main():
    flags = cpu_flags()
    level = isa_level(flags)
    cap = os.environ.get("PAGODA_CPU_ISA", "")
    interesting = ["avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                   "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_int8"]
    print(json.dumps({
        "cpu_model": cpu_model(),
        "nproc": os.cpu_count(),
        "isa": level,
        "isa_flags": [f for f in interesting if f in flags],
        "pagoda_cpu_isa_env": cap or None,
        "pagoda_kernels": pagoda_kernels(level, cap),
        "pagoda_int16_env": os.environ.get("PAGODA_CPU_INT16"),
        "loadavg": " ".join(open("/proc/loadavg").read().split()[:3]),
    }))


if __name__ == "__main__":
    main()
