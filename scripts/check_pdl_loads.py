#!/usr/bin/env python3
"""Checks that no PDL kernel reads memory through the non-coherent path before its wait.

A kernel launched with programmatic dependent launch (kernels/common/pdl.cuh) starts while the
kernel before it still runs, and must read that kernel's output only after griddepcontrol.wait
(ACQBULK in SASS). ptxas treats non-coherent loads (__ldg, loads from const __restrict__
parameters: LDG...CONSTANT in SASS) as reading memory that no kernel writes and may schedule them
above the wait, where they read the previous step's data: the FP8 skinny GEMM read the previous
layer's activation codes that way. This disassembles the kernel library and fails on every
function that has a wait and a non-coherent load before it, unless ALLOWED names the function with
the reason its early loads read only weights or step metadata.

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
    """Yields (arch, function, count) for each function with a wait and non-coherent loads above it."""
    arch, function, waited, count = "", None, False, 0
    has_wait = False

    def flush():
        if function is not None and has_wait and count > 0:
            yield arch, function, count

    for line in sass.splitlines():
        m = re.search(r"arch = (sm_\w+)", line)
        if m:
            arch = m.group(1)
            continue
        m = re.search(r"Function : (\S+)", line)
        if m:
            yield from flush()
            function, waited, count, has_wait = m.group(1), False, 0, False
            continue
        if function is None:
            continue
        if re.search(r"\bACQBULK\b", line):
            waited = has_wait = True
        elif not waited and re.search(r"\bLDG\.\S*CONSTANT\b", line):
            count += 1
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
        for arch, function, count in early_loads(out.stdout):
            if not any(fragment in function for fragment in ALLOWED):
                failures.append(f"{arch} {function}: {count} non-coherent loads before the wait")
    if functions == 0:
        print("check_pdl_loads: cuobjdump found no functions in " + " ".join(libraries),
              file=sys.stderr)
        return 1
    for f in failures:
        print(f)
    print(f"check_pdl_loads: {functions} functions, {len(failures)} with non-coherent loads "
          "above griddepcontrol.wait")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
