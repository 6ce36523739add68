#!/usr/bin/env python3
"""Greedy-decoding golden data for the Gemma 3 270M GGUF forward pass, made with HF `transformers`.

Run with the dev venv (scripts/setup_dev_venv.sh creates .venv-dev) from the repository root,
after scripts/setup.sh has put the model under models/gemma-3-270m/:

    HF_HUB_OFFLINE=1 .venv-dev/bin/python tests/golden/forward/make_gemma3_golden.py

Writes tests/data/forward/gemma3_greedy.json (a few minutes on 2 idle CPU threads).

What it does (the same layout as make_smollm2_golden.py, so one C++ reader serves both):
  * AutoModelForCausalLM.from_pretrained(models/gemma-3-270m, gguf_file=..., dtype=float32):
    transformers dequantizes Q4_K/Q6_K/Q8_0/F32 to float32, takes the 1 back off the norm weights
    that llama.cpp's converter adds (Gemma's RMSNorm scales by 1 + weight), and fills what the GGUF
    does not say from Gemma3TextConfig's defaults (query_pre_attn_scalar, rope_local_base_freq,
    the 5-sliding-then-1-global layer pattern): all are written to "model.config" and checked
    against google/gemma-3-270m's published config.json values below.
  * Tokenizer: AutoTokenizer from the same GGUF (tests/golden/tokenizer checks Pagoda's against
    it). Text prompts get BOS (tokenizer.ggml.add_bos_token = true); chat prompts are rendered
    with tests/data/template/templates/google-gemma-3-it.jinja (the GGUF, a base model, carries no
    chat template), whose "<bos>" is the only BOS. Feed the stored prompt ids, not the text.
  * Prompts: a subset of smollm2_prompts.py's, including two of more than 512 tokens, so that the
    sliding-window layers (window 512) drop the earliest positions while the global ones keep them.
  * Per prompt: prefill with the KV cache, then 32 greedy steps (argmax over the float32 logits, no
    EOS stop, no penalties); top-10 ids, logits and log-probabilities for steps 0..15, the top-1
    minus top-2 gap for all 32 (near ties flagged).
  * Float64 re-run, teacher-forced with the float32 tokens (RMSNorm and RoPE patched to compute in
    float64, since transformers keeps both in float32 otherwise): the float32 noise floor.
"""

import hashlib
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE))

from common import f32, tool_versions, write_json  # noqa: E402
from smollm2_prompts import CASES as SMOLLM2_CASES  # noqa: E402

MODEL_DIR = ROOT / "models" / "gemma-3-270m"
GGUF_NAME = "gemma-3-270m-q4_k_m.gguf"
TEMPLATE = ROOT / "tests" / "data" / "template" / "templates" / "google-gemma-3-it.jinja"
OUT = ROOT / "tests" / "data" / "forward" / "gemma3_greedy.json"

N_GEN = 32
N_TOPK_STEPS = 16
TOPK = 10
NEAR_TIE = 1e-3

TEXT_CASES = ["short_the", "short_capital", "short_once", "short_counting", "short_newlines",
              "medium_math", "medium_numbers", "zh", "emoji", "code_python", "long_essay",
              "long_code"]
CHAT_CASES = ["chat_capital", "chat_system", "chat_multiturn"]

# google/gemma-3-270m config.json, the values the GGUF must yield (some only as defaults).
EXPECTED_CONFIG = {
    "hidden_size": 640, "num_hidden_layers": 18, "num_attention_heads": 4,
    "num_key_value_heads": 1, "head_dim": 256, "intermediate_size": 2048, "vocab_size": 262144,
    "sliding_window": 512, "query_pre_attn_scalar": 256, "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6, "hidden_activation": "gelu_pytorch_tanh",
    "final_logit_softcapping": None, "attn_logit_softcapping": None,
}


def load_model_and_tokenizer():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(
        str(MODEL_DIR), gguf_file=GGUF_NAME, dtype=torch.float32, attn_implementation="sdpa")
    model.eval()
    tok = AutoTokenizer.from_pretrained(str(MODEL_DIR), gguf_file=GGUF_NAME)
    return model, tok


def checked_config(model):
    cfg = model.config
    got = {k: getattr(cfg, k) for k in EXPECTED_CONFIG}
    assert abs(got["rms_norm_eps"] - 1e-6) < 1e-12, got["rms_norm_eps"]
    got["rms_norm_eps"] = 1e-6
    assert got == EXPECTED_CONFIG, (got, EXPECTED_CONFIG)
    rope = {t: float(cfg.rope_parameters[t]["rope_theta"]) for t in ("full_attention", "sliding_attention")}
    assert rope == {"full_attention": 1e6, "sliding_attention": 1e4}, rope
    expected_types = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(18)]
    assert list(cfg.layer_types) == expected_types, cfg.layer_types
    assert cfg.tie_word_embeddings
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    return dict(EXPECTED_CONFIG, rope_theta=rope, layer_types=list(cfg.layer_types),
                tie_word_embeddings=True,
                embed_scale=f32(model.model.embed_tokens.embed_scale),
                sliding_window_meaning="on a sliding_attention layer, position i attends to the "
                                       "positions j with i - 512 < j <= i")


def make_fp64(model):
    """model.double(), with Gemma 3's RMSNorm (1 + weight) and RoPE tables computed in float64."""
    model.double()
    rot = model.model.rotary_emb
    inv = {}
    for layer_type in rot.layer_types:
        theta = float(model.config.rope_parameters[layer_type]["rope_theta"])
        dim = model.config.head_dim
        inv[layer_type] = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        ref = getattr(rot, f"{layer_type}_inv_freq").double()
        assert torch.allclose(inv[layer_type], ref, rtol=1e-6, atol=0), layer_type
        assert getattr(rot, f"{layer_type}_attention_scaling") == 1.0

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
def greedy(model, prompt_ids):
    out = model(input_ids=torch.tensor([prompt_ids]), use_cache=True, logits_to_keep=1)
    past, logits = out.past_key_values, out.logits[0, -1]
    tokens, rows = [], []
    for step in range(N_GEN):
        rows.append(logits.clone())
        nxt = int(torch.argmax(logits))
        tokens.append(nxt)
        if step == N_GEN - 1:
            break
        out = model(input_ids=torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
        past, logits = out.past_key_values, out.logits[0, -1]
    return tokens, rows


@torch.no_grad()
def teacher_forced(model, prompt_ids, gen):
    ids = torch.tensor([prompt_ids + gen[:-1]])
    return list(model(input_ids=ids, logits_to_keep=len(gen)).logits[0])


def prompts(tok):
    by_name = {name: (kind, payload) for name, kind, payload in SMOLLM2_CASES}
    template = TEMPLATE.read_text(encoding="utf-8")
    cases = []
    for name in TEXT_CASES + CHAT_CASES:
        kind, payload = by_name[name]
        case = {"name": name, "kind": kind}
        if kind == "chat":
            text = tok.apply_chat_template(payload, chat_template=template,
                                           add_generation_prompt=True, tokenize=False)
            ids = tok(text, add_special_tokens=False)["input_ids"]
            case["messages"] = payload
        else:
            text = payload
            ids = tok(text)["input_ids"]
        assert ids.count(tok.bos_token_id) == 1 and ids[0] == tok.bos_token_id, (name, ids[:4])
        case["text"] = text
        case["prompt_ids"] = ids
        case["n_prompt"] = len(ids)
        cases.append(case)
    return cases


def main():
    torch.set_num_threads(2)
    t0 = time.time()
    model, tok = load_model_and_tokenizer()
    print(f"loaded in {time.time() - t0:.1f}s", flush=True)
    config = checked_config(model)
    cases = prompts(tok)
    assert any(c["n_prompt"] > 2 * config["sliding_window"] for c in cases)

    rows32 = {}
    for case in cases:
        t = time.time()
        tokens, rows = greedy(model, case["prompt_ids"])
        rows32[case["name"]] = rows
        case["greedy_ids"] = tokens
        case["greedy_text"] = tok.decode(tokens)
        gaps, steps = [], []
        for s, row in enumerate(rows):
            top2 = torch.topk(row, 2)
            gaps.append(f32(top2.values[0] - top2.values[1]))
            if s < N_TOPK_STEPS:
                lp = torch.log_softmax(row, dim=-1)
                top = torch.topk(row, TOPK)
                steps.append({"step": s, "ids": top.indices.tolist(),
                              "logits": [f32(v) for v in top.values],
                              "logprobs": [f32(lp[i]) for i in top.indices]})
        case["top1_top2_gap"] = gaps
        case["near_tie_steps"] = [s for s, g in enumerate(gaps) if g < NEAR_TIE]
        case["topk"] = steps
        print(f"fp32 {case['name']:18s} n={case['n_prompt']:5d} {time.time() - t:6.1f}s "
              f"min_gap={min(gaps):.2e} {case['greedy_text'][:60]!r}", flush=True)

    make_fp64(model)
    noise = {"max_abs_logprob_diff_top10": 0.0, "max_abs_logit_diff_top10": 0.0,
             "max_abs_gap_diff": 0.0, "argmax_differs": [], "per_case": {}}
    for case in cases:
        t = time.time()
        rows64 = teacher_forced(model, case["prompt_ids"], case["greedy_ids"])
        worst_lp = worst_logit = worst_gap = 0.0
        for s, (r32, r64) in enumerate(zip(rows32[case["name"]], rows64)):
            ids = torch.topk(r32, TOPK).indices
            lp32 = torch.log_softmax(r32, -1)[ids].double()
            lp64 = torch.log_softmax(r64, -1)[ids]
            worst_lp = max(worst_lp, float((lp64 - lp32).abs().max()))
            worst_logit = max(worst_logit, float((r64[ids] - r32.double()[ids]).abs().max()))
            top2 = torch.topk(r64, 2).values
            worst_gap = max(worst_gap, abs(float(top2[0] - top2[1]) - case["top1_top2_gap"][s]))
            if int(torch.argmax(r64)) != case["greedy_ids"][s]:
                noise["argmax_differs"].append({"case": case["name"], "step": s,
                                                "gap_fp32": case["top1_top2_gap"][s]})
            if s < N_TOPK_STEPS:
                case["topk"][s]["logprobs_fp64"] = [f32(v) for v in lp64]
        noise["per_case"][case["name"]] = {"max_abs_logprob_diff_top10": f32(worst_lp),
                                           "max_abs_logit_diff_top10": f32(worst_logit)}
        noise["max_abs_logprob_diff_top10"] = max(noise["max_abs_logprob_diff_top10"], worst_lp)
        noise["max_abs_logit_diff_top10"] = max(noise["max_abs_logit_diff_top10"], worst_logit)
        noise["max_abs_gap_diff"] = max(noise["max_abs_gap_diff"], worst_gap)
        print(f"fp64 {case['name']:18s} {time.time() - t:6.1f}s lp_diff={worst_lp:.2e} "
              f"logit_diff={worst_logit:.2e}", flush=True)
    for k in ("max_abs_logprob_diff_top10", "max_abs_logit_diff_top10", "max_abs_gap_diff"):
        noise[k] = f32(noise[k])
    noise["any_greedy_token_differs"] = bool(noise["argmax_differs"])
    noise["note"] = ("float64 run: model.double() plus Gemma3RMSNorm and the RoPE tables in "
                     "float64, SDPA attention; fed the float32 greedy tokens. Diffs are over all "
                     "32 steps, at the float32 top-10 ids of each step.")

    sha = hashlib.sha256((MODEL_DIR / GGUF_NAME).read_bytes()).hexdigest()
    result = {
        "generator": "tests/golden/forward/make_gemma3_golden.py",
        "tool_versions": tool_versions(),
        "model": {"file": f"models/gemma-3-270m/{GGUF_NAME}", "sha256": sha,
                  "loader": "AutoModelForCausalLM.from_pretrained(model_dir, gguf_file=..., "
                            "dtype=torch.float32, attn_implementation='sdpa')",
                  "config": config},
        "settings": {
            "n_gen": N_GEN, "topk": TOPK, "topk_steps": N_TOPK_STEPS,
            "decoding": "greedy argmax over float32 logits; KV cache; EOS ignored; no penalties",
            "step_meaning": "step 0 = logits at the prompt's last position (predicts greedy_ids[0]); "
                            "step k = logits after feeding greedy_ids[k-1] (predicts greedy_ids[k])",
            "logprobs": "log_softmax in float32 of the float32 logits (logprobs_fp64: the float64 "
                        "model's log-probabilities of the same ids)",
            "near_tie_threshold": NEAR_TIE,
            "near_tie_meaning": "steps whose top1-top2 logit gap < threshold: either token is an "
                                "acceptable argmax; greedy sequences may legitimately diverge there",
            "bos": "text prompts start with <bos> (id 2; tokenizer.ggml.add_bos_token = true); chat "
                   "prompts get it from the template only",
            "chat_template": "tests/data/template/templates/google-gemma-3-it.jinja",
        },
        "fp32_vs_fp64": noise,
        "cases": cases,
    }
    write_json(OUT, result)
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size} bytes) in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
