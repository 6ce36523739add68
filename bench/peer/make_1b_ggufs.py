#!/usr/bin/env python3
"""Writes the Llama-3.2-1B-shaped benchmark model as an F16 GGUF with random weights.

Usage: make_1b_ggufs.py OUT.gguf [--tokenizer-from GGUF] [--seed N]
       make_1b_ggufs.py --weight-bytes GGUF      -> prints the bytes one decode token reads (JSON)

Shape (Llama-3.2-1B): hidden 2048, 16 layers, 32 heads, 8 KV heads, head_dim 64, intermediate
8192, tied embeddings (no output.weight), rope theta 500000, RMS eps 1e-5; vocabulary and
tokenizer from the SmolLM2 GGUF's tokenizer.* metadata (49152 tokens), so the model is ~1.07 B
parameters rather than 1.24 B. Weights: normal(0, 0.02) from numpy's PCG64 with a fixed seed,
tensor by tensor in file order; norm weights 1.0. Llama 3's rope scaling is left out (random
weights: it changes no work). The quantized files are made from this one by llama.cpp's
llama-quantize (bench/peer/compare_1b.sh).

The file is reused when OUT.gguf.params.json records the same parameters and the file's sha256;
tensors are streamed one at a time, so memory stays at one tensor (~64 MiB of float32).
"""
import argparse
import hashlib
import json
import os
import sys

import numpy as np

try:
    import gguf
except ImportError:
    sys.exit("make_1b_ggufs: the gguf package is missing (pip install -r requirements.txt into "
             ".venv, or run with .venv/bin/python)")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_llama  # noqa: E402

GENERATOR_VERSION = 1  # bump when the weights this script writes change
SHAPE = {
    "hidden": 2048,
    "layers": 16,
    "heads": 32,
    "kv_heads": 8,
    "head_dim": 64,
    "intermediate": 8192,
    "rope_theta": 500000.0,
    "rms_eps": 1e-5,
    "context_length": 8192,
    "init_std": 0.02,
}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            h.update(chunk)
    return h.hexdigest()


def tensor_plan(vocab):
    """(name, numpy shape) in file order; a weight [out, in] is ggml ne = [in, out]."""
    return [(name, dims) for name, dims, _, _ in gguf_llama.llama_tensors(
        hidden=SHAPE["hidden"], intermediate=SHAPE["intermediate"], layers=SHAPE["layers"],
        heads=SHAPE["heads"], kv_heads=SHAPE["kv_heads"], head_dim=SHAPE["head_dim"],
        vocab=vocab, tied=True)]


def write_model(out, tokenizer_from, seed):
    reader = gguf_llama.tokenizer_source(tokenizer_from, "make_1b_ggufs")
    vocab = gguf_llama.token_count(reader)
    params = dict(SHAPE, vocab=vocab, seed=seed, version=GENERATOR_VERSION,
                  tokenizer_sha256=sha256(tokenizer_from))
    meta_path = out + ".params.json"
    if os.path.exists(out) and os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        if meta.get("params") == params and meta.get("sha256") == sha256(out):
            print(f"make_1b_ggufs: reusing {out} (parameters and sha256 match)", file=sys.stderr)
            return
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    part = out + ".part"
    writer = gguf.GGUFWriter(part, "llama")
    writer.add_name("llama-1b-shape random (Pagoda benchmark)")
    gguf_llama.add_llama_metadata(
        writer, context_length=SHAPE["context_length"], hidden=SHAPE["hidden"],
        layers=SHAPE["layers"], intermediate=SHAPE["intermediate"], heads=SHAPE["heads"],
        kv_heads=SHAPE["kv_heads"], head_dim=SHAPE["head_dim"], rope_theta=SHAPE["rope_theta"],
        rms_eps=SHAPE["rms_eps"], vocab=vocab, file_type=gguf.LlamaFileType.MOSTLY_F16)
    gguf_llama.copy_tokenizer(reader, writer)

    plan = tensor_plan(vocab)
    for name, shape in plan:
        dtype = np.float32 if len(shape) == 1 else np.float16
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        writer.add_tensor_info(name, shape, np.dtype(dtype), nbytes)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    rng = np.random.Generator(np.random.PCG64(seed))
    for name, shape in plan:
        if len(shape) == 1:
            writer.write_tensor_data(np.ones(shape, dtype=np.float32))
        else:
            values = rng.standard_normal(shape, dtype=np.float32)
            values *= SHAPE["init_std"]
            writer.write_tensor_data(values.astype(np.float16))
    writer.close()
    os.replace(part, out)
    with open(meta_path, "w") as f:
        json.dump({"params": params, "sha256": sha256(out)}, f, indent=1)
    print(f"make_1b_ggufs: wrote {out} ({os.path.getsize(out) / 1e9:.2f} GB)", file=sys.stderr)


def weight_bytes(path):
    """Bytes one decode token reads: every layer weight, the final norm and the LM head.

    The LM head is output.weight, or token_embd.weight when the embeddings are tied; the
    embedding lookup itself reads one row, which is left out.
    """
    reader = gguf.GGUFReader(path)
    tensors = {t.name: t for t in reader.tensors}
    head = tensors.get("output.weight") or tensors["token_embd.weight"]
    total = sum(int(t.n_bytes) for n, t in tensors.items()
                if n.startswith("blk.") or n == "output_norm.weight")
    types = {}
    for t in reader.tensors:
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    return {"bytes_per_token": total + int(head.n_bytes), "lm_head": head.name,
            "lm_head_type": head.tensor_type.name, "file_bytes": os.path.getsize(path),
            "tensor_types": dict(sorted(types.items()))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--tokenizer-from", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "models",
        "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--weight-bytes", metavar="GGUF")
    args = ap.parse_args()
    if args.weight_bytes:
        print(json.dumps(weight_bytes(args.weight_bytes)))
        return
    if not args.out:
        ap.error("OUT.gguf is required")
    if not os.path.exists(args.tokenizer_from):
        sys.exit(f"make_1b_ggufs: no tokenizer source at {args.tokenizer_from} "
                 "(run scripts/setup.sh)")
    write_model(args.out, args.tokenizer_from, args.seed)


if __name__ == "__main__":
    main()
