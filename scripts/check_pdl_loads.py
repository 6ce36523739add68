#!/usr/bin/env python3
"""Checks that no PDL kernel reads memory through the non-coherent path before its wait.

A kernel launched with programmatic dependent launch (kernels/common/pdl.cuh) starts while the
kernel before it still runs, and must read that kernel's output only after griddepcontrol.wait
(ACQBULK in SASS). ptxas treats non-coherent loads (__ldg, loads from const __restrict__
parameters: LDG...CONSTANT in SASS) as reading memory that no kernel writes and may schedule them
above the wait, where they read the previous step's data: the FP8 skinny GEMM read the previous
layer's activation codes that way. This disassembles the kernel library and fails on every
function that has a wait and a non-coherent load before it, unless ALLOWED names the function with
the reason its early loads read only weights or step metadata; on a function STREAMING_ONLY
names with any load before its wait other than the weights' streaming ones; and on a function
ASYNC_BEFORE_BARRIER names with a plain load or a CTA barrier before its wait (its activations are
copied by cp.async after a barrier, so a wait moved below that barrier shows as one above it).

Usage: check_pdl_loads.py LIBRARY...   (cuobjdump and nvdisasm from $CUOBJDUMP, PATH, the CUDA
toolkit, or the nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels in .venv, which
scripts/setup.sh installs)
"""
import glob
import os
import re
import shutil
import subprocess
import sys

# Mangled-name fragment -> why its loads before the wait are safe.
ALLOWED = {
    "rope_kv_cache_kernel": "reads inv_freq (a weight) before the wait; qkv only after it",
}

# Mangled-name fragment -> kernels whose only loads before the wait are the weights' streaming
# (evict-first, LDG...EF) ones: any other global load there is x or its scales read too early,
# coherent or not (a source edit that moved load_x above pdl_wait would pass the rule above).
STREAMING_ONLY = {
    "fp8_skinny_gemm_kernel": "streams its weights before the wait; x and x_scales after it",
}

# Mangled-name fragment -> kernels that copy only weights (cp.async, LDGSTS) before the wait and
# their activations by cp.async after a __syncthreads: any LDG or BAR.SYNC above the wait fails.
ASYNC_BEFORE_BARRIER = {
    "w4a16_gemm_kernel": "primes its weight ring before the wait; x after it, behind a barrier",
}

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_cuobjdump():
    candidates = [os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump"),
                  "/usr/local/cuda/bin/cuobjdump"]
    candidates += sorted(glob.glob(os.path.join(
        ROOT, ".venv/lib/python3*/site-packages/nvidia/cu*/bin/cuobjdump")))
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def early_loads(sass):
    """Yields (arch, function, non-coherent, non-streaming, synchronous) for each function with a
    wait and global loads or barriers above it (in text order): the non-coherent loads
    (LDG...CONSTANT), those not marked evict-first (LDG or LDGSTS without .EF), and the loads and
    CTA barriers that are not cp.async (LDG, BAR.SYNC)."""
    arch, function, waited, count, plain, sync = "", None, False, 0, 0, 0
    has_wait = False

    def flush():
        if function is not None and has_wait and (count > 0 or plain > 0 or sync > 0):
            yield arch, function, count, plain, sync

    for line in sass.splitlines():
        m = re.search(r"arch = (sm_\w+)", line)
        if m:
            arch = m.group(1)
            continue
        m = re.search(r"Function : (\S+)", line)
        if m:
            yield from flush()
            function, waited, count, plain, sync, has_wait = m.group(1), False, 0, 0, 0, False
            continue
        if function is None:
            continue
        if re.search(r"\bACQBULK\b", line):
            waited = has_wait = True
        elif not waited:
            load = re.search(r"\bLDG(STS)?(\.\S*)?(?=\s)", line)  # not LDGDEPBAR
            if load:
                flags = load.group(2) or ""
                count += "CONSTANT" in flags
                plain += ".EF" not in flags
                sync += load.group(1) is None
            sync += re.search(r"\bBAR\.SYNC\b", line) is not None
    yield from flush()


def main(libraries):
    if not libraries:
        print(__doc__, file=sys.stderr)
        return 2
    tool = find_cuobjdump()
    if tool is None:
        print("check_pdl_loads: no cuobjdump (scripts/setup.sh installs the nvidia-cuda-cuobjdump "
              "wheel into .venv; or set CUOBJDUMP)", file=sys.stderr)
        return 2
    failures, functions = [], 0
    for library in libraries:
        env = dict(os.environ)  # cuobjdump -sass runs nvdisasm, which its wheel puts beside it
        env["PATH"] = os.path.dirname(tool) + os.pathsep + env.get("PATH", "")
        out = subprocess.run([tool, "-sass", library], capture_output=True, text=True, env=env)
        if out.returncode != 0:
            print(f"check_pdl_loads: {tool} -sass {library} failed:\n{out.stderr}", file=sys.stderr)
            return 2
        functions += out.stdout.count("Function : ")
        for arch, function, count, plain, sync in early_loads(out.stdout):
            if count > 0 and not any(fragment in function for fragment in ALLOWED):
                failures.append(f"{arch} {function}: {count} non-coherent loads before the wait")
            elif plain > 0 and any(fragment in function for fragment in STREAMING_ONLY):
                failures.append(f"{arch} {function}: {plain} loads before the wait that are not "
                                "the weights' streaming ones")
            elif sync > 0 and any(fragment in function for fragment in ASYNC_BEFORE_BARRIER):
                failures.append(f"{arch} {function}: {sync} loads or barriers before the wait "
                                "that are not cp.async")
    if functions == 0:
        print("check_pdl_loads: cuobjdump found no functions in " + " ".join(libraries),
              file=sys.stderr)
        return 1
    for f in failures:
        print(f)
    print(f"check_pdl_loads: {functions} functions, {len(failures)} with loads they must not make "
          "above griddepcontrol.wait")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
