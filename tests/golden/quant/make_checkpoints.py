#!/usr/bin/env python3
"""Hugging Face checkpoints of SmolLM2-135M in several quantization formats, made from the default
GGUF model, for the perplexity comparison (tests/e2e/test_quantization.py, docs/perf/quantization.md).

Run from the repository root with the CI venv (numpy + gguf; no torch needed):

    .venv/bin/python tests/golden/quant/make_checkpoints.py OUT_DIR [--formats bf16,gptq,...]

The checkpoints are 60-270 MB each, so they are built when needed and never committed. Every
format starts from the same weights: the GGUF's tensors dequantized by gguf.quants.dequantize
(Q4_1 layers, Q8_0 embedding), Q/K rows un-permuted from llama.cpp's layout back to HF's
rotate-half order, rounded to bfloat16. Formats (OUT_DIR/<name>/):
  bf16          every tensor BF16: the baseline
  gptq          GPTQ v1 serialization, 4-bit asym, group 128, no act-order (RTN, not GPTQ's
                Hessian-based rounding: the format is what is tested, not the algorithm)
  gptq_g32      the same at group 32 (the group size of the GGUF's Q4_1 layers)
  gptq_act      GPTQ, 4-bit sym, group 128, desc_act with a seeded random channel order (g_idx)
  awq           AWQ GEMM packing, 4-bit asym (zero point), group 128 (RTN, no activation-aware
                scaling search)
  fp8           compressed-tensors float-quantized: E4M3 weights, per-channel BF16 weight_scale
                [N, 1] = amax / 448, dynamic per-token activations (config only)
Embedding, norms (and the tied LM head) stay BF16 in every format. Packing follows
int4_formats.py. Each folder gets config.json, generation_config.json, model.safetensors and the
SmolLM2 tokenizer files from tests/data/tokenizer/smollm2/.
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE))

from int4_formats import pack_awq, pack_gptq, rtn_quantize  # noqa: E402
from safetensors_io import bf16_bits_to_float, float_to_bf16_bits, write_safetensors  # noqa: E402

DEFAULT_GGUF = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
TOKENIZER_DIR = ROOT / "tests" / "data" / "tokenizer" / "smollm2"
FORMATS = ("bf16", "gptq", "gptq_g32", "gptq_act", "awq", "fp8")
GROUP_SIZE = 128
ACT_ORDER_SEED = 7

LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
LINEAR_SUFFIXES = ("_proj.weight",)


def field(reader, key):
    return reader.fields[key].contents()


def unpermute_rows(w, n_head):
    """Inverse of llama.cpp's convert_hf_to_gguf permute (which pairs adjacent RoPE dimensions)."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def read_gguf(path):
    import gguf
    reader = gguf.GGUFReader(str(path))
    arch = field(reader, "general.architecture")
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": int(field(reader, f"{arch}.embedding_length")),
        "intermediate_size": int(field(reader, f"{arch}.feed_forward_length")),
        "num_hidden_layers": int(field(reader, f"{arch}.block_count")),
        "num_attention_heads": int(field(reader, f"{arch}.attention.head_count")),
        "num_key_value_heads": int(field(reader, f"{arch}.attention.head_count_kv")),
        "max_position_embeddings": int(field(reader, f"{arch}.context_length")),
        "rms_norm_eps": float(field(reader, f"{arch}.attention.layer_norm_rms_epsilon")),
        "rope_theta": float(field(reader, f"{arch}.rope.freq_base")),
        "vocab_size": int(field(reader, f"{arch}.vocab_size")),
        "bos_token_id": int(field(reader, "tokenizer.ggml.bos_token_id")),
        "eos_token_id": int(field(reader, "tokenizer.ggml.eos_token_id")),
        "tie_word_embeddings": not any(t.name == "output.weight" for t in reader.tensors),
        "hidden_act": "silu",
        "torch_dtype": "bfloat16",
    }
    weights = {}
    for t in reader.tensors:
        values = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        values = values.reshape([int(d) for d in reversed(t.shape)])
        if t.name.startswith("blk."):
            _, layer, rest = t.name.split(".", 2)
            if rest == "attn_q.weight":
                values = unpermute_rows(values, config["num_attention_heads"])
            elif rest == "attn_k.weight":
                values = unpermute_rows(values, config["num_key_value_heads"])
            name = f"model.layers.{layer}.{LAYER_NAMES[rest]}"
        else:
            name = {"token_embd.weight": "model.embed_tokens.weight",
                    "output_norm.weight": "model.norm.weight",
                    "output.weight": "lm_head.weight"}[t.name]
        # Every format starts from the same BF16 weights.
        weights[name] = bf16_bits_to_float(float_to_bf16_bits(values))
    return config, weights


def e4m3_table():
    """The 127 non-negative finite E4M3 values, code order (= value order)."""
    codes = np.arange(127)
    exponent, mantissa = codes >> 3, codes & 7
    return np.where(exponent == 0, mantissa / 8.0 * 2.0 ** -6,
                    (1 + mantissa / 8.0) * 2.0 ** (exponent - 7)).astype(np.float64)


def to_e4m3(x):
    """float -> E4M3 codes, nearest value, ties to the even code, saturating at 448."""
    table = e4m3_table()
    a = np.minimum(np.abs(x.astype(np.float64)), 448.0)
    hi = np.clip(np.searchsorted(table, a), 0, 126)
    lo = np.clip(hi - 1, 0, 126)
    d_lo, d_hi = a - table[lo], table[hi] - a
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    code = np.where(pick_hi, hi, lo).astype(np.uint8)
    return code | np.where(np.signbit(x), 0x80, 0).astype(np.uint8)


def bf16(values):
    return (float_to_bf16_bits(values), "BF16")


def quantized_tensors(fmt, weights):
    rng = np.random.default_rng(ACT_ORDER_SEED)
    out = {}
    for name, w in weights.items():
        if not name.endswith(LINEAR_SUFFIXES) or fmt == "bf16":
            out[name] = bf16(w)
            continue
        base = name[: -len(".weight")]
        if fmt in ("gptq", "gptq_g32", "gptq_act"):
            act = fmt == "gptq_act"
            q, zeros, scales, g_idx = rtn_quantize(w, group_size(fmt), sym=act,
                                                   act_order_rng=rng if act else None, min_zero=1)
            for key, value in pack_gptq(q, zeros, scales, g_idx, v1=True).items():
                out[f"{base}.{key}"] = value
        elif fmt == "awq":
            q, zeros, scales, _ = rtn_quantize(w, GROUP_SIZE, sym=False)
            for key, value in pack_awq(q, zeros, scales).items():
                out[f"{base}.{key}"] = value
        elif fmt == "fp8":
            amax = np.abs(w).max(axis=1, keepdims=True)
            scale_bits = float_to_bf16_bits(np.where(amax > 0, amax / 448.0, 1.0))
            scale = bf16_bits_to_float(scale_bits)
            out[f"{base}.weight"] = (to_e4m3(w / scale), "F8_E4M3")
            out[f"{base}.weight_scale"] = (scale_bits, "BF16")
    return out


def group_size(fmt):
    return 32 if fmt == "gptq_g32" else GROUP_SIZE


def quantization_config(fmt):
    if fmt in ("gptq", "gptq_g32", "gptq_act"):
        return {"quant_method": "gptq", "bits": 4, "group_size": group_size(fmt),
                "sym": fmt == "gptq_act", "desc_act": fmt == "gptq_act",
                "checkpoint_format": "gptq", "true_sequential": True, "damp_percent": 0.01}
    if fmt == "awq":
        return {"quant_method": "awq", "bits": 4, "group_size": GROUP_SIZE, "zero_point": True,
                "version": "gemm", "modules_to_not_convert": None}
    if fmt == "fp8":
        scheme = {"num_bits": 8, "type": "float", "symmetric": True, "dynamic": False}
        return {"quant_method": "compressed-tensors", "format": "float-quantized",
                "quantization_status": "compressed", "ignore": ["lm_head"],
                "config_groups": {"group_0": {
                    "targets": ["Linear"],
                    "weights": dict(scheme, strategy="channel"),
                    "input_activations": dict(scheme, strategy="token", dynamic=True)}}}
    return None


def write_checkpoint(out, fmt, config, weights):
    out.mkdir(parents=True, exist_ok=True)
    cfg = dict(config)
    if quantization_config(fmt):
        cfg["quantization_config"] = quantization_config(fmt)
    (out / "config.json").write_text(json.dumps(cfg, indent=1) + "\n")
    (out / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"]}) + "\n")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER_DIR / name, out / name)
    write_safetensors(out / "model.safetensors", quantized_tensors(fmt, weights),
                      metadata={"format": "pt"})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--gguf", type=Path, default=DEFAULT_GGUF)
    parser.add_argument("--formats", default=",".join(FORMATS))
    args = parser.parse_args()
    formats = args.formats.split(",")
    for fmt in formats:
        if fmt not in FORMATS:
            parser.error(f"unknown format {fmt}; choose from {', '.join(FORMATS)}")
    config, weights = read_gguf(args.gguf)
    for fmt in formats:
        write_checkpoint(args.out / fmt, fmt, config, weights)
        print(f"wrote {args.out / fmt}")


if __name__ == "__main__":
    main()
