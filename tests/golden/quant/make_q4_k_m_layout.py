#!/usr/bin/env python3
"""llama-quantize's Q4_K_M layout (each tensor's type) for two small Llama shapes: the golden data
that bench/peer/make_q4_k_m_gguf.py's layout is checked against (tests/e2e/test_q4_k_m_gguf.py).

Run from the repository root with the CI venv (numpy and gguf) after llama.cpp is built
(bench/peer/compare_llama_cpp.sh fetches and builds it under .cache/peer/):

    .venv/bin/python tests/golden/quant/make_q4_k_m_layout.py [LLAMA_QUANTIZE]

Each case writes an F16 GGUF of the shape (zeros; only the shapes matter to the type choice),
quantizes it with `llama-quantize IN OUT Q4_K_M`, and records every tensor's type. The cases
cover what the choice depends on for a dense Llama: the layer count (16 and 32, as Llama-3.2-1B
and Llama-3.1-8B: the "more bits" layers) and tied or separate output embeddings. Widths are
small but multiples of 256, so no tensor falls back to another type. Writes
tests/data/quant/q4_k_m_layout.json: {case: {"config": HF config, "llama_cpp": version,
"types": {tensor: type}}}.
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import gguf
import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "bench" / "peer"))

import gguf_llama  # noqa: E402
import make_q4_k_m_gguf  # noqa: E402  (for the tensor names and shapes of a Llama only)

OUT = ROOT / "tests" / "data" / "quant" / "q4_k_m_layout.json"
VERSION = "0.3.36"  # llama-cpp-python's sdist, as bench/peer/compare_llama_cpp.sh builds it
TOKENIZER = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
BASE = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
        "intermediate_size": 512, "num_attention_heads": 8, "num_key_value_heads": 2,
        "head_dim": 32, "vocab_size": 49152, "rope_theta": 500000.0, "rms_norm_eps": 1e-5,
        "max_position_embeddings": 2048}
CASES = {
    "layers16_tied": dict(BASE, num_hidden_layers=16, tie_word_embeddings=True),
    "layers32_untied": dict(BASE, num_hidden_layers=32, tie_word_embeddings=False),
}


def write_f16(config, path):
    s = make_q4_k_m_gguf.shape(config)
    writer = gguf.GGUFWriter(path, "llama")
    make_q4_k_m_gguf.add_llama_metadata(writer, config, s, gguf.LlamaFileType.MOSTLY_F16)
    tokenizer = gguf_llama.tokenizer_source(str(TOKENIZER), "make_q4_k_m_layout")
    gguf_llama.copy_tokenizer(tokenizer, writer)
    for name, dims, qtype in make_q4_k_m_gguf.tensor_plan(s):
        dtype = np.float32 if qtype == make_q4_k_m_gguf.F32 else np.float16
        writer.add_tensor(name, np.zeros(dims, dtype=dtype))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main():
    quantize = sys.argv[1] if len(sys.argv) > 1 else str(
        ROOT / ".cache" / "peer" / f"llama.cpp-{VERSION}" / "build" / "bin" / "llama-quantize")
    if not os.access(quantize, os.X_OK):
        sys.exit(f"make_q4_k_m_layout: no llama-quantize at {quantize} "
                 "(bench/peer/compare_llama_cpp.sh builds it)")
    golden = {}
    with tempfile.TemporaryDirectory() as tmp:
        for case, config in CASES.items():
            f16, q = os.path.join(tmp, f"{case}.f16.gguf"), os.path.join(tmp, f"{case}.gguf")
            write_f16(config, f16)
            subprocess.run([quantize, f16, q, "Q4_K_M"], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(q).tensors}
            golden[case] = {"config": config, "llama_cpp": VERSION, "types": types}
    OUT.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
