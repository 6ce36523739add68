#!/usr/bin/env python3
"""Tiny random-weight Hugging Face checkpoints and their logits, for the safetensors forward tests.

Run with the dev venv (scripts/setup_dev_venv.sh creates .venv-dev) from the repository root:

    HF_HUB_OFFLINE=1 .venv-dev/bin/python tests/golden/forward/make_tiny_hf_models.py [FOLDER...]

(with folder names, e.g. tiny_qwen3, only those are rebuilt and their logits remade).

Writes, under tests/data/forward/ (about 20 seconds on 2 CPU threads):
  tiny_llama/          LlamaForCausalLM: hidden 64, intermediate 128, 3 layers, 4 heads / 2 KV heads,
                       head_dim 16, vocab 384, tied embeddings (no lm_head.weight in the file),
                       rope_theta 1e4 with llama3 rope scaling (factor 8, low 1, high 4, original
                       max 64), max_position_embeddings 256; weights float32, one model.safetensors
  tiny_llama_sharded/  the same weights saved with max_shard_size: model.safetensors.index.json
                       + 2 shards
  tiny_qwen2/          Qwen2ForCausalLM (QKV bias): hidden 96, intermediate 176, 2 layers, 6 heads /
                       2 KV heads, head_dim 16, vocab 320, untied lm_head, rope_theta 1e6, no
                       rope scaling; weights bfloat16
  tiny_qwen3/          Qwen3ForCausalLM (per-head q_norm / k_norm before RoPE, no QKV bias): hidden
                       96, intermediate 160, 2 layers, 2 heads / 1 KV head, head_dim 64 (from the
                       config, not hidden / heads; 64 so that the CUDA backend runs it too), vocab
                       352, tied embeddings, rope_theta 1e6; weights float32
  tiny_mistral/        MistralForCausalLM with its sliding window set (MistralConfig applies it to
                       every layer; Mistral 7B v0.1 shipped 4096): hidden 64, intermediate 128, 3
                       layers, 2 heads / 1 KV head, head_dim 64 (so the CUDA backend runs it),
                       sliding_window 12 (so the 150-token sequence drops keys on every layer),
                       vocab 288, untied lm_head, rope_theta 1e4; weights float32
  tiny_gemma3/         Gemma3ForCausalLM (model_type gemma3_text): hidden 64, intermediate 144, 3
                       layers (sliding, sliding, full), 2 heads / 1 KV head, head_dim 256 (as the
                       real ones; the CUDA kernels need their 256 variant), sliding_window 12 (so
                       the 150-token sequence drops keys on the sliding layers),
                       query_pre_attn_scalar 64 (scores scaled by 1/8, not head_dim^-1/2), RoPE
                       theta 1e4 on sliding layers and 1e6 with linear scaling (factor 4) on the
                       full one, GeGLU (gelu_pytorch_tanh), sandwich norms, vocab 416, tied
                       embeddings; weights float32. Gemma's norms scale by (1 + weight): the
                       stored weights are 0.2 N(0, 1) here, so the scale is near 1.
Each folder: config.json, generation_config.json, the safetensors, and logits.json with, for 3
fixed id sequences (lengths 1, 7, 150; numpy seed 1234, or the next seed
whose argmaxes all win by >= 5e-3), the float32 logits of the last 4
positions (full vocab rows), per position the argmax id and max logit, and the 16-token greedy
continuation (KV cache, argmax). The logits come from the model re-loaded from the saved folder
with from_pretrained(folder, dtype=float32), i.e. from exactly the committed files; a float64
re-run (RMSNorm and RoPE in float64 too) gives the reference's own rounding noise.

Weights are re-initialized (torch.manual_seed) so that every tensor matters: linear weights
N(0, 1/fan_in), embeddings N(0, 0.1^2) (tied: a larger scale makes the
model echo its input token) / N(0, 1) (untied), lm_head N(0, 4/hidden), norm
weights 1 + N(0, 0.2^2), Q/K/V biases N(0, 0.5^2).
"""

import json
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE))

from common import f32, make_fp64, tool_versions, write_json  # noqa: E402

OUT = ROOT / "tests" / "data" / "forward"
SEQ_LENGTHS = (1, 7, 150)
SEQ_SEED = 1234
N_LAST = 4
N_GEN = 16
MIN_GAP = 5e-3


def tiny_llama_config():
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=384, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, hidden_act="silu",
        max_position_embeddings=256, rms_norm_eps=1e-5, tie_word_embeddings=True,
        rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 64},
        bos_token_id=1, eos_token_id=2, pad_token_id=None)


def tiny_qwen2_config():
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=320, hidden_size=96, intermediate_size=176, num_hidden_layers=2,
        num_attention_heads=6, num_key_value_heads=2, head_dim=16, hidden_act="silu",
        max_position_embeddings=512, rms_norm_eps=1e-6, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        use_sliding_window=False, bos_token_id=1, eos_token_id=2)


def tiny_qwen3_config():
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=352, hidden_size=96, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=64, hidden_act="silu",
        max_position_embeddings=512, rms_norm_eps=1e-6, tie_word_embeddings=True,
        attention_bias=False, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        use_sliding_window=False, bos_token_id=1, eos_token_id=2)


def tiny_mistral_config():
    from transformers import MistralConfig
    return MistralConfig(
        vocab_size=288, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
        num_attention_heads=2, num_key_value_heads=1, head_dim=64, hidden_act="silu",
        max_position_embeddings=512, rms_norm_eps=1e-5, tie_word_embeddings=False,
        sliding_window=12, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bos_token_id=1, eos_token_id=2)


def tiny_gemma3_config():
    from transformers import Gemma3TextConfig

    return Gemma3TextConfig(
        vocab_size=416, hidden_size=64, intermediate_size=144, num_hidden_layers=3,
        num_attention_heads=2, num_key_value_heads=1, head_dim=256,
        hidden_activation="gelu_pytorch_tanh", max_position_embeddings=512, rms_norm_eps=1e-6,
        tie_word_embeddings=True, sliding_window=12,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        query_pre_attn_scalar=64,
        rope_parameters={
            "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1000000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        final_logit_softcapping=None, attn_logit_softcapping=None, pad_token_id=0,
        bos_token_id=2, eos_token_id=1)


def is_gemma3(model):
    return model.config.model_type == "gemma3_text"


def make_fp64_gemma3(model):
    """model.double() with Gemma 3's RMSNorm (1 + weight) and its per-layer-type RoPE tables
    (linear scaling included) computed in float64."""
    model.double()
    rot = model.model.rotary_emb
    cfg = model.config
    inv = {}
    for layer_type in rot.layer_types:
        params = cfg.rope_parameters[layer_type]
        theta = float(params["rope_theta"])
        dim = cfg.head_dim
        table = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        if params.get("rope_type") == "linear":
            table = table / float(params["factor"])
        ref = getattr(rot, f"{layer_type}_inv_freq").double()
        assert torch.allclose(table, ref, rtol=1e-6, atol=0), layer_type
        assert getattr(rot, f"{layer_type}_attention_scaling") == 1.0
        inv[layer_type] = table

    def rope_forward(self, x, position_ids, layer_type):
        freqs = position_ids[..., None].double() * inv[layer_type].to(x.device)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    def rms_forward(self, x):
        h = x.double()
        out = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (out * (1.0 + self.weight.double())).to(x.dtype)

    rot.forward = rope_forward.__get__(rot)
    for mod in model.modules():
        if type(mod).__name__ == "Gemma3RMSNorm":
            mod.forward = rms_forward.__get__(mod)
    return model


@torch.no_grad()
def init_weights(model, seed):
    torch.manual_seed(seed)
    tied = model.config.tie_word_embeddings
    for name, p in model.named_parameters():  # tied lm_head is listed once, as embed_tokens
        if name.endswith("embed_tokens.weight"):
            p.normal_(0.0, 0.1 if tied else 1.0)
        elif name == "lm_head.weight":
            p.normal_(0.0, 2.0 * p.shape[1] ** -0.5)
        elif "norm" in name and type(model).__name__.startswith("Gemma3"):
            p.copy_(0.2 * torch.randn_like(p))  # Gemma's RMSNorm scales by 1 + weight
        elif "norm" in name:
            p.copy_(1.0 + 0.2 * torch.randn_like(p))
        elif name.endswith(".bias"):
            p.normal_(0.0, 0.5)
        elif p.dim() == 2:
            p.normal_(0.0, p.shape[1] ** -0.5)
        else:
            raise AssertionError(name)


def build(cls_name, config, seed, dtype, folder, gen_kwargs, shard_folder=None):
    import transformers
    from transformers import GenerationConfig

    torch.manual_seed(seed)
    model = getattr(transformers, cls_name)(config)
    init_weights(model, seed)
    model.to(dtype)
    model.generation_config = GenerationConfig(**gen_kwargs)
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder, safe_serialization=True)
    if shard_folder is not None:
        shutil.rmtree(shard_folder, ignore_errors=True)
        total = sum(p.numel() * p.element_size() for p in model.parameters())
        model.save_pretrained(shard_folder, safe_serialization=True, max_shard_size=total * 6 // 10)
        shards = sorted(p.name for p in shard_folder.glob("model-*.safetensors"))
        assert len(shards) == 2 and (shard_folder / "model.safetensors.index.json").exists(), shards
    return model


def sequences(vocab, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocab, size=n).tolist() for n in SEQ_LENGTHS]


@torch.no_grad()
def greedy(model, ids):
    out = model(input_ids=torch.tensor([ids]), use_cache=True, logits_to_keep=1)
    past, logits = out.past_key_values, out.logits[0, -1]
    tokens, gaps = [], []
    for step in range(N_GEN):
        top2 = torch.topk(logits, 2).values
        gaps.append(f32(top2[0] - top2[1]))
        nxt = int(torch.argmax(logits))
        tokens.append(nxt)
        if step == N_GEN - 1:
            break
        out = model(input_ids=torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
        past, logits = out.past_key_values, out.logits[0, -1]
    return tokens, gaps


@torch.no_grad()
def reference(folder):
    """logits.json content, from the model loaded back from `folder` in float32."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32,
                                                 attn_implementation="sdpa").eval()
    cfg = model.config
    # The first seed from SEQ_SEED on whose sequences every argmax (each position, each greedy
    # step) wins by at least MIN_GAP, so that exact argmax comparisons are robust.
    for seed in range(SEQ_SEED, SEQ_SEED + 100):
        seqs = sequences(cfg.vocab_size, seed)
        full32 = [model(input_ids=torch.tensor([ids])).logits[0] for ids in seqs]
        top2 = [torch.topk(l, 2, dim=-1).values for l in full32]
        if min(float((t[:, 0] - t[:, 1]).min()) for t in top2) < MIN_GAP:
            continue
        conts = [greedy(model, ids) for ids in seqs]
        if min(min(g) for _, g in conts) >= MIN_GAP:
            break
    else:
        raise RuntimeError("no tie-free seed found")
    rot = model.model.rotary_emb
    if is_gemma3(model):
        inv32 = {t: getattr(rot, f"{t}_inv_freq").tolist() for t in rot.layer_types}
    else:
        inv32 = rot.inv_freq.tolist()
    result_seqs = []
    for ids, logits, (cont, gaps) in zip(seqs, full32, conts):
        top2 = torch.topk(logits, 2, dim=-1).values
        n = len(ids)
        result_seqs.append({
            "ids": ids,
            "last_positions": list(range(max(0, n - N_LAST), n)),
            "last_logits": [[f32(v) for v in row] for row in logits[-N_LAST:]],
            "argmax": logits.argmax(-1).tolist(),
            "max_logit": [f32(v) for v in top2[:, 0]],
            "min_top1_top2_gap": f32((top2[:, 0] - top2[:, 1]).min()),
            "greedy_ids": cont,
            "greedy_top1_top2_gap": gaps,
        })
    # float64 reference noise
    if is_gemma3(model):
        make_fp64_gemma3(model)
    else:
        make_fp64(model)
    worst, argmax_differs = 0.0, False
    for ids, l32, rec in zip(seqs, full32, result_seqs):
        l64 = model(input_ids=torch.tensor([ids])).logits[0]
        worst = max(worst, float((l64 - l32.double()).abs().max()))
        argmax_differs |= l64.argmax(-1).tolist() != rec["argmax"]
        for k, tok in enumerate(rec["greedy_ids"]):  # teacher forced with the float32 continuation
            out = model(input_ids=torch.tensor([ids + rec["greedy_ids"][:k]])).logits[0, -1]
            argmax_differs |= int(out.argmax()) != tok
    return {
        "generator": "tests/golden/forward/make_tiny_hf_models.py",
        "tool_versions": tool_versions(),
        "model_class": type(model).__name__,
        "loaded_as": "AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, "
                     "attn_implementation='sdpa')",
        "rope_inv_freq_fp32": ({t: [f32(v) for v in row] for t, row in inv32.items()}
                               if isinstance(inv32, dict) else [f32(v) for v in inv32]),
        "sequence_seed": seed,
        "sequences_drawn_as": "numpy.random.default_rng(sequence_seed).integers(0, vocab_size, "
                              "size=n) for n in (1, 7, 150), in that order",
        "min_top1_top2_gap_guaranteed": MIN_GAP,
        "n_gen": N_GEN,
        "notes": "last_logits[i] is the full float32 logits row of position last_positions[i]; "
                 "argmax/max_logit cover every position of ids; greedy_ids continue ids with "
                 "argmax decoding (KV cache), greedy_top1_top2_gap[k] is the gap at the step "
                 "that chose greedy_ids[k]",
        "fp32_vs_fp64": {"max_abs_logit_diff": f32(worst), "any_argmax_differs": bool(argmax_differs),
                         "note": "max_abs_logit_diff: every position of the 3 sequences; "
                                 "any_argmax_differs: those positions plus the greedy steps (teacher "
                                 "forced); float64 = model.double() with RMSNorm and RoPE in float64"},
        "sequences": result_seqs,
    }


def folder_size(folder):
    return sum(p.stat().st_size for p in folder.iterdir())


def main():
    torch.set_num_threads(2)
    t0 = time.time()
    llama_dir, sharded_dir, qwen_dir = OUT / "tiny_llama", OUT / "tiny_llama_sharded", OUT / "tiny_qwen2"
    qwen3_dir = OUT / "tiny_qwen3"
    gemma3_dir = OUT / "tiny_gemma3"
    mistral_dir = OUT / "tiny_mistral"
    # Folder names to regenerate (e.g. tiny_qwen3); every folder when none is given.
    only = set(sys.argv[1:])

    def wanted(folder):
        return not only or folder.name in only

    if wanted(llama_dir) or wanted(sharded_dir):
        build("LlamaForCausalLM", tiny_llama_config(), 20240701, torch.float32, llama_dir,
              {"bos_token_id": 1, "eos_token_id": 2}, shard_folder=sharded_dir)
    if wanted(qwen_dir):
        build("Qwen2ForCausalLM", tiny_qwen2_config(), 20240702, torch.bfloat16, qwen_dir,
              {"bos_token_id": 1, "eos_token_id": [2, 3], "do_sample": True, "temperature": 0.7,
               "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05})
    if wanted(qwen3_dir):
        build("Qwen3ForCausalLM", tiny_qwen3_config(), 20240703, torch.float32, qwen3_dir,
              {"bos_token_id": 1, "eos_token_id": 2})

    if wanted(mistral_dir):
        build("MistralForCausalLM", tiny_mistral_config(), 20240705, torch.float32, mistral_dir,
              {"bos_token_id": 1, "eos_token_id": 2})

    if wanted(gemma3_dir):
        build("Gemma3ForCausalLM", tiny_gemma3_config(), 20240704, torch.float32, gemma3_dir,
              {"bos_token_id": 2, "eos_token_id": [1, 106]})

    for folder in (llama_dir, sharded_dir, qwen_dir, qwen3_dir, mistral_dir, gemma3_dir):
        if not wanted(folder):
            continue
        ref = reference(folder)
        write_json(folder / "logits.json", ref)
        print(f"{folder.relative_to(ROOT)}: {folder_size(folder)} bytes, "
              f"fp64 diff {ref['fp32_vs_fp64']['max_abs_logit_diff']:.2e}, "
              f"greedy {[s['greedy_ids'][:6] for s in ref['sequences']]}", flush=True)

    if not (wanted(llama_dir) and wanted(sharded_dir)):
        print(f"done in {time.time() - t0:.0f}s")
        return
    # the sharded copy holds the same tensors; its logits agree to float32 rounding (not bit for
    # bit: CPU kernels may take different paths for differently aligned buffers)
    from safetensors.torch import load_file
    single = load_file(str(llama_dir / "model.safetensors"))
    sharded = {}
    for f in sorted(sharded_dir.glob("model-*.safetensors")):
        sharded.update(load_file(str(f)))
    assert single.keys() == sharded.keys() and all(torch.equal(single[k], sharded[k]) for k in single)
    a = json.loads((llama_dir / "logits.json").read_text())
    b = json.loads((sharded_dir / "logits.json").read_text())
    for x, y in zip(a["sequences"], b["sequences"]):
        assert x["ids"] == y["ids"] and x["argmax"] == y["argmax"] and x["greedy_ids"] == y["greedy_ids"]
        assert np.abs(np.array(x["last_logits"]) - np.array(y["last_logits"])).max() < 1e-4
    print(f"done in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
