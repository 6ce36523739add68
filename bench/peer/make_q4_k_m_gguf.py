#!/usr/bin/env python3
"""Writes a Llama-shaped model (a Hugging Face config.json) as a GGUF in llama.cpp's Q4_K_M layout,
with random blocks: what an 8B Q4_K_M file costs in memory and time, without the 8B checkpoint.

Usage: make_q4_k_m_gguf.py CONFIG.json OUT.gguf --tokenizer-from GGUF [--seed N]
       make_q4_k_m_gguf.py --types CONFIG.json   -> {tensor name: GGML type} (JSON), no file

Layout: llama-quantize's choice for Q4_K_M on a dense Llama (llama-quant.cpp,
llama_tensor_get_type_impl): Q4_K everywhere, except attn_v and ffn_down in the "more bits" layers
(the first and last eighth, and every third between) and the output matrix, which take Q6_K; a
tied embedding is the output matrix. Norms stay F32. For Llama-3.1-8B with its own 128,256-token
vocabulary (ggml-vocab-llama-bpe.gguf) that is 4.92 GB, the size of the published Q4_K_M files.

The tokenizer may have fewer tokens than the config's vocabulary: the embedding and output rows
past them are padding, as in many published GGUFs (the default model's tokenizer stands in for
Llama 3's where that is not at hand; the weights are the same bytes).

Blocks: random quants; each Q4_K block's scales equal its mins, with dmin = 7.5 d, so its values
are d * scale * (q - 7.5); each Q6_K value is d * scale * (q - 32). Both are zero-mean with a
standard deviation near 0.02 (a trained Llama's weights), so activations stay finite through every
layer. Llama 3's RoPE scaling (the rope_freqs tensor) is left out: random weights, the same work.
Memory: one tensor's blocks at a time (the 8B embedding: 295 MB).
"""
import argparse
import json
import os
import sys

import numpy as np

try:
    import gguf
except ImportError:
    sys.exit("make_q4_k_m_gguf: the gguf package is missing (pip install -r requirements.txt "
             "into .venv, or run with .venv/bin/python)")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_llama  # noqa: E402

Q4_K = gguf.GGMLQuantizationType.Q4_K
Q6_K = gguf.GGMLQuantizationType.Q6_K
F32 = gguf.GGMLQuantizationType.F32
QK_K = 256  # values per K-quant block

# Each format's step d, and its scale codes' range: picked so the values' standard deviation is
# about 0.02. Q4_K: d * rms(scale in 32..63) * std(q - 7.5) = 8.9e-5 * 48.5 * 4.61.
# Q6_K: d * rms(scale in 4..15) * std(q - 32) = 1.07e-4 * 10.1 * 18.5.
Q4_K_D, Q4_K_SCALES = 8.9e-5, (32, 64)
Q6_K_D, Q6_K_SCALES = 1.07e-4, (4, 16)


def load_config(path):
    with open(path) as f:
        config = json.load(f)
    if config.get("model_type") not in ("llama", None) and \
            "LlamaForCausalLM" not in config.get("architectures", []):
        sys.exit(f"make_q4_k_m_gguf: {path} is not a Llama config")
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "vocab_size"):
        if key not in config:
            sys.exit(f"make_q4_k_m_gguf: {path} has no {key}")
    return config


def shape(config):
    heads = config["num_attention_heads"]
    hidden = config["hidden_size"]
    return {
        "hidden": hidden,
        "intermediate": config["intermediate_size"],
        "layers": config["num_hidden_layers"],
        "heads": heads,
        "kv_heads": config.get("num_key_value_heads", heads),
        "head_dim": config.get("head_dim", hidden // heads),
        "vocab": config["vocab_size"],
        "tied": bool(config.get("tie_word_embeddings", False)),
    }


def more_bits(layer, layers):
    """llama-quantize's use_more_bits: the layers whose attn_v and ffn_down get Q6_K in Q4_K_M."""
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def q4_k_m_type(role, layer, s):
    """llama-quantize's Q4_K_M choice for a dense Llama's tensor."""
    if role == "norm":
        return F32
    if role == "output" or (role == "embed" and s["tied"]):
        return Q6_K
    if role in ("v", "down") and more_bits(layer, s["layers"]):
        return Q6_K
    return Q4_K


def tensor_plan(s):
    """(name, numpy shape [rows, columns], GGML type) in file order; norms are 1-D F32."""
    plan = [(name, dims, q4_k_m_type(role, layer, s))
            for name, dims, role, layer in gguf_llama.llama_tensors(
                hidden=s["hidden"], intermediate=s["intermediate"], layers=s["layers"],
                heads=s["heads"], kv_heads=s["kv_heads"], head_dim=s["head_dim"],
                vocab=s["vocab"], tied=s["tied"])]
    for name, dims, qtype in plan:
        if qtype != F32 and dims[1] % QK_K != 0:
            sys.exit(f"make_q4_k_m_gguf: {name} has rows of {dims[1]} values, not a multiple of "
                     f"{QK_K} (llama-quantize would fall back to another type)")
    return plan


def half_bytes(value, blocks):
    return np.full((blocks, 1), value, dtype=np.float16).view(np.uint8)


def q4_k_blocks(rng, blocks):
    """Q4_K blocks [blocks, 144]: d, dmin (f16), 12 bytes of 6-bit scales and mins, 128 of quants.

    Eight sub-block scales s (32..63), packed as ggml's get_scale_min_k4 reads them, with every
    min equal to its scale: bytes 0-3 and 4-7 hold s[0..3] and the top bits of s[4..7], bytes
    8-11 the low nibbles of s[4..7] twice (scale, min).
    """
    out = rng.integers(0, 256, (blocks, 144), dtype=np.uint8)
    s = rng.integers(*Q4_K_SCALES, (blocks, 8), dtype=np.uint8)
    out[:, 0:2] = half_bytes(Q4_K_D, blocks)
    out[:, 2:4] = half_bytes(7.5 * Q4_K_D, blocks)
    low = (s[:, 0:4] & 63) | ((s[:, 4:8] >> 4) << 6)
    out[:, 4:8] = low
    out[:, 8:12] = low
    out[:, 12:16] = (s[:, 4:8] & 15) | ((s[:, 4:8] & 15) << 4)
    return out


def q6_k_blocks(rng, blocks):
    """Q6_K blocks [blocks, 210]: 128 bytes of low and 64 of high quant bits, 16 int8 scales, d."""
    out = rng.integers(0, 256, (blocks, 210), dtype=np.uint8)
    out[:, 192:208] = rng.integers(*Q6_K_SCALES, (blocks, 16), dtype=np.uint8)
    out[:, 208:210] = half_bytes(Q6_K_D, blocks)
    return out


def row_bytes(qtype, columns):
    block_values, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    return columns // block_values * block_bytes


def tensor_data(rng, dims, qtype):
    if qtype == F32:
        return np.ones(dims, dtype=np.float32)
    rows, columns = dims
    blocks = rows * columns // QK_K
    data = q4_k_blocks(rng, blocks) if qtype == Q4_K else q6_k_blocks(rng, blocks)
    return data.reshape(rows, row_bytes(qtype, columns))


def add_llama_metadata(writer, config, s, file_type):
    gguf_llama.add_llama_metadata(
        writer, context_length=config.get("max_position_embeddings", 8192), hidden=s["hidden"],
        layers=s["layers"], intermediate=s["intermediate"], heads=s["heads"],
        kv_heads=s["kv_heads"], head_dim=s["head_dim"],
        rope_theta=config.get("rope_theta", 10000.0), rms_eps=config.get("rms_norm_eps", 1e-5),
        vocab=s["vocab"], file_type=file_type, head_lengths=True)


def write_model(config_path, out, tokenizer_from, seed):
    config = load_config(config_path)
    s = shape(config)
    plan = tensor_plan(s)
    tokenizer = gguf_llama.tokenizer_source(tokenizer_from, "make_q4_k_m_gguf")
    tokens = gguf_llama.token_count(tokenizer)
    if tokens > s["vocab"]:
        sys.exit(f"make_q4_k_m_gguf: {tokenizer_from} has {tokens} tokens, more than the config's "
                 f"{s['vocab']}")
    part = out + ".part"
    writer = gguf.GGUFWriter(part, "llama")
    writer.add_name(f"{os.path.basename(config_path)} random Q4_K_M (Pagoda benchmark)")
    add_llama_metadata(writer, config, s, gguf.LlamaFileType.MOSTLY_Q4_K_M)
    gguf_llama.copy_tokenizer(tokenizer, writer)
    for name, dims, qtype in plan:
        if qtype == F32:
            writer.add_tensor_info(name, dims, np.dtype(np.float32), dims[0] * 4)
        else:
            nbytes = dims[0] * row_bytes(qtype, dims[1])
            writer.add_tensor_info(name, (dims[0], row_bytes(qtype, dims[1])), np.dtype(np.uint8),
                                   nbytes, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    rng = np.random.Generator(np.random.PCG64(seed))
    for _, dims, qtype in plan:
        writer.write_tensor_data(tensor_data(rng, dims, qtype))
    writer.close()
    os.replace(part, out)
    print(f"make_q4_k_m_gguf: wrote {out} ({os.path.getsize(out) / 1e9:.2f} GB)", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config", help="a Hugging Face config.json of a Llama model")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--tokenizer-from", help="a GGUF whose tokenizer.* metadata the file takes "
                    "(at most the config's vocabulary; rows past its tokens are padding)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--types", action="store_true", help="print each tensor's type and stop")
    args = ap.parse_args()
    if args.types:
        plan = tensor_plan(shape(load_config(args.config)))
        print(json.dumps({name: qtype.name for name, _, qtype in plan}, indent=1))
        return
    if not args.out or not args.tokenizer_from:
        ap.error("OUT.gguf and --tokenizer-from are required")
    write_model(args.config, args.out, args.tokenizer_from, args.seed)


if __name__ == "__main__":
    main()
