#!/usr/bin/env python3
"""Golden GPTQ / AWQ layers and their dequantized weights, for tests/unit/quant/int4_checkpoint_test.

Run from the repository root with the CI venv (numpy only):

    .venv/bin/python tests/golden/quant/make_int4_golden.py

Writes tests/data/quant/int4_layers.safetensors (~150 KB) and int4_layers.json. Each case is a
random linear layer W [N, K] quantized round-to-nearest, packed in the checkpoint format, and
dequantized again by the numpy reference of int4_formats.py (whose docstring says why the
reference is numpy and not the torch-based tools). Tensors per case: <case>.qweight, .qzeros,
.scales (, .g_idx) exactly as a checkpoint stores them, and <case>.expected float32 [N, K].
The JSON lists each case's quant_method, group_size, sym, desc_act and shape.
"""

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE))

from int4_formats import (dequantize_awq, dequantize_gptq, pack_awq, pack_gptq,  # noqa: E402
                          rtn_quantize)
from safetensors_io import write_safetensors  # noqa: E402

OUT = ROOT / "tests" / "data" / "quant"
SEED = 20261122

# (name, method, N, K, group_size, sym, desc_act)
CASES = [
    ("gptq_sym_g32", "gptq", 24, 128, 32, True, False),
    ("gptq_asym_g64", "gptq", 16, 192, 64, False, False),
    ("gptq_asym_g128_tail", "gptq", 16, 320, 128, False, False),  # last group: 64 channels
    ("gptq_sym_channel", "gptq", 8, 96, -1, True, False),
    ("gptq_asym_g32_act_order", "gptq", 16, 256, 32, False, True),
    ("gptq_sym_g64_act_order", "gptq", 8, 192, 64, True, True),
    ("awq_g32", "awq", 16, 128, 32, False, False),
    ("awq_g128", "awq", 24, 256, 128, False, False),
    ("awq_channel", "awq", 8, 96, -1, False, False),
]


def main():
    rng = np.random.default_rng(SEED)
    tensors = {}
    cases = []
    for name, method, n, k, group_size, sym, desc_act in CASES:
        w = rng.normal(0.0, 0.05, size=(n, k)).astype(np.float32)
        q, zeros, scales, g_idx = rtn_quantize(
            w, group_size, sym, act_order_rng=rng if desc_act else None,
            min_zero=1 if method == "gptq" else 0)
        if method == "gptq":
            packed = pack_gptq(q, zeros, scales, g_idx, v1=True)
            expected = dequantize_gptq(packed, v1=True)
        else:
            packed = pack_awq(q, zeros, scales)
            expected = dequantize_awq(packed, k if group_size == -1 else group_size)
        for key, value in packed.items():
            tensors[f"{name}.{key}"] = value
        tensors[f"{name}.expected"] = expected
        cases.append({"name": name, "quant_method": method, "rows": n, "cols": k,
                      "group_size": group_size, "sym": sym, "desc_act": desc_act})
    OUT.mkdir(parents=True, exist_ok=True)
    write_safetensors(OUT / "int4_layers.safetensors", tensors)
    (OUT / "int4_layers.json").write_text(json.dumps(
        {"tool_versions": {"numpy": np.__version__}, "seed": SEED, "cases": cases}, indent=1) + "\n")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
