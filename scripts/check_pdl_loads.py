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
RING_BEFORE_WAIT names with a plain load, a CTA barrier, or another number of cp.async commit
groups than its weight ring's stages before its wait (its activations come by cp.async too, in
groups of their own, so a wait moved below their first copy shows as one group too many).

Usage: check_pdl_loads.py LIBRARY...   (cuobjdump and nvdisasm from $CUOBJDUMP, PATH, the CUDA
toolkit, or the nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels in .venv, which
scripts/setup.sh installs)
"""
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

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

# Mangled-name fragment -> (commit groups, reason) for kernels that prime a cp.async ring of
# weights before the wait, one group per stage, and copy x after it: any LDG or BAR.SYNC above the
# wait, or another number of commits (LDGDEPBAR) there, fails.
RING_BEFORE_WAIT = {
    "w4a16_gemm_kernel": (8, "primes its 8-stage weight ring before the wait; x after it"),
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
    """Yields (arch, function, non-coherent, non-streaming, synchronous, commits) for each
    function with a wait, counting above it (in text order): the non-coherent loads
    (LDG...CONSTANT), those not marked evict-first (LDG or LDGSTS without .EF), the loads and CTA
    barriers that are not cp.async (LDG, BAR.SYNC), and the cp.async commit groups (LDGDEPBAR)."""
    # The dump is hundreds of MB: functions without a wait (most) are skipped by one substring
    # search each, and only the lines above a wait are read one by one.
    parts = sass.split("Function : ")
    arch = last_arch(parts[0], "")
    for part in parts[1:]:
        wait = part.find("ACQBULK")
        if wait >= 0:
            function = part.split(None, 1)[0]
            count = plain = sync = commits = 0
            for line in part[:wait].splitlines():
                load = re.search(r"\bLDG(STS)?(\.\S*)?(?=\s)", line)  # not LDGDEPBAR
                if load:
                    flags = load.group(2) or ""
                    count += "CONSTANT" in flags
                    plain += ".EF" not in flags
                    sync += load.group(1) is None
                sync += re.search(r"\bBAR\.SYNC\b", line) is not None
                commits += re.search(r"\bLDGDEPBAR\b", line) is not None
            yield arch, function, count, plain, sync, commits
        # A header naming the next functions' arch follows the last function of an ELF image.
        arch = last_arch(part, arch)


def last_arch(text, arch):
    at = text.rfind("arch = ")
    if at < 0:
        return arch
    return re.match(r"arch = (sm_\w+)", text[at:]).group(1)


def disassemble(tool, library):
    """The SASS of every member of `library` (an archive or an object), the members disassembled
    in parallel; (text, error)."""
    env = dict(os.environ)  # cuobjdump -sass runs nvdisasm, which its wheel puts beside it
    env["PATH"] = os.path.dirname(tool) + os.pathsep + env.get("PATH", "")

    def run(path):
        out = subprocess.run([tool, "-sass", path], capture_output=True, text=True, env=env)
        if out.returncode == 0 or "does not contain device code" in out.stderr:  # a host object
            return out.stdout, ""
        return "", f"{tool} -sass {path} failed:\n{out.stderr}"

    if not library.endswith(".a"):
        return run(library)
    listed = subprocess.run(["ar", "t", library], capture_output=True, text=True)
    names = listed.stdout.split()
    if listed.returncode != 0 or len(set(names)) != len(names):
        return run(library)  # members that `ar x` cannot tell apart: the archive in one go
    with tempfile.TemporaryDirectory() as members:
        subprocess.run(["ar", "x", os.path.abspath(library)], cwd=members, check=True)
        paths = [os.path.join(members, name) for name in names]
        with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            results = list(pool.map(run, paths))
    return "".join(r[0] for r in results), "".join(r[1] for r in results)


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
        sass, error = disassemble(tool, library)
        if error:
            print(f"check_pdl_loads: {error}", file=sys.stderr)
            return 2
        functions += sass.count("Function : ")
        for arch, function, count, plain, sync, commits in early_loads(sass):
            ring = next((v[0] for k, v in RING_BEFORE_WAIT.items() if k in function), None)
            if count > 0 and not any(fragment in function for fragment in ALLOWED):
                failures.append(f"{arch} {function}: {count} non-coherent loads before the wait")
            elif plain > 0 and any(fragment in function for fragment in STREAMING_ONLY):
                failures.append(f"{arch} {function}: {plain} loads before the wait that are not "
                                "the weights' streaming ones")
            elif ring is not None and (sync > 0 or commits != ring):
                failures.append(f"{arch} {function}: {sync} loads or barriers that are not "
                                f"cp.async and {commits} commit groups (want {ring}) before the "
                                "wait")
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
