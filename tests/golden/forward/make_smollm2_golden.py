#!/usr/bin/env python3
"""Greedy-decoding golden data for the SmolLM2 GGUF forward pass, made with HF `transformers`.

Run with the dev venv (scripts/setup_dev_venv.sh creates .venv-dev; loading a GGUF model in
transformers also needs `accelerate`) from the repository root, after scripts/setup.sh has put the
model under models/:

    HF_HUB_OFFLINE=1 .venv-dev/bin/python tests/golden/forward/make_smollm2_golden.py

Writes tests/data/forward/smollm2_greedy.json (about 3 minutes on 2 idle CPU threads).

What it does:
  * AutoModelForCausalLM.from_pretrained("models", gguf_file=..., dtype=float32): transformers
    dequantizes Q8_0/Q4_1 to float32 and undoes llama.cpp's Q/K row permutation (checked below
    against our own un-permutation of the `gguf` package's dequantized tensors).
  * Tokenizer: AutoTokenizer from the same GGUF, with SmolLM2's per-digit pre-tokenizer split put
    back (the GGUF says tokenizer.ggml.pre = "smollm"; transformers' conversion drops that split).
    The stored prompt ids are what the model is fed: tests should feed the ids, not the text.
  * Per prompt: prefill with the KV cache, then 32 greedy steps (argmax over the float32 logits, no
    EOS stop, no penalties). Step 0 is the prompt's last position; step k (k >= 1) is the position
    of generated token k-1. For steps 0..15: top-10 ids, logits and log-probabilities; for all 32
    steps: the top-1 minus top-2 logit gap ("near ties" are flagged).
  * Float64 re-run, one forward pass over prompt + float32 continuation (teacher forcing): max |logprob64 -
    logprob32| over the float32 top-10 of every stored step, and whether the float64 argmax ever
    differs from the float32 greedy token ("fp32_vs_fp64").
"""

import hashlib
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE))

from common import dumps, f32, make_fp64, tool_versions, write_json  # noqa: E402,F401
from smollm2_prompts import CASES  # noqa: E402

MODELS = ROOT / "models"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
OUT = ROOT / "tests" / "data" / "forward" / "smollm2_greedy.json"

N_GEN = 32          # greedy tokens per prompt
N_TOPK_STEPS = 16   # steps (0 = prompt's last position) with top-k data
TOPK = 10
NEAR_TIE = 1e-3     # top1 - top2 logit gap below which either token is an acceptable argmax


def load_model_and_tokenizer():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(
        str(MODELS), gguf_file=GGUF_NAME, dtype=torch.float32, attn_implementation="sdpa")
    model.eval()
    tok = AutoTokenizer.from_pretrained(str(MODELS), gguf_file=GGUF_NAME)
    return model, tok


def file_tokenizer(tok):
    """The transformers GGUF tokenizer with the per-digit split that the file's "smollm" pre asks for."""
    from tokenizers import Tokenizer, pre_tokenizers

    t = Tokenizer.from_str(tok.backend_tokenizer.to_str())
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    return t


def check_qk_unpermute(model):
    """transformers' q_proj/k_proj == our un-permutation of the GGUF rows (dequantized by `gguf`).

    llama.cpp's converter stores, for each head, rows in the order (i, j) -> 2*i + j (pairs
    interleaved) where the HF checkpoint has j*head_dim/2 + i (halves), i < head_dim/2, j in {0, 1}.
    """
    from gguf import GGUFReader
    from gguf.quants import dequantize

    cfg = model.config
    reader = GGUFReader(str(MODELS / GGUF_NAME))
    tensors = {t.name: t for t in reader.tensors}
    out = {}
    for gname, hf, n_head in (("blk.0.attn_q.weight", model.model.layers[0].self_attn.q_proj, cfg.num_attention_heads),
                              ("blk.0.attn_k.weight", model.model.layers[0].self_attn.k_proj, cfg.num_key_value_heads),
                              ("blk.29.attn_k.weight", model.model.layers[29].self_attn.k_proj, cfg.num_key_value_heads)):
        t = tensors[gname]
        w = dequantize(t.data, t.tensor_type).reshape(-1, cfg.hidden_size).astype(np.float32)
        hd = w.shape[0] // n_head
        # GGUF row h*hd + 2*i + j  ->  HF row h*hd + j*hd/2 + i
        unperm = w.reshape(n_head, hd // 2, 2, -1).swapaxes(1, 2).reshape(w.shape)
        diff_unperm = float(np.abs(unperm - hf.weight.detach().numpy()).max())
        diff_raw = float(np.abs(w - hf.weight.detach().numpy()).max())
        out[gname] = {"max_abs_diff_after_unpermute": diff_unperm, "max_abs_diff_as_stored": diff_raw}
        assert diff_unperm == 0.0, (gname, diff_unperm)
    return out


@torch.no_grad()
def greedy(model, prompt_ids):
    """Prefill + N_GEN decode steps with the KV cache. Returns (tokens, per-step logits rows)."""
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
    """Logits rows of steps 0..len(gen)-1 from one forward pass over prompt + gen[:-1]."""
    ids = torch.tensor([prompt_ids + gen[:-1]])
    return list(model(input_ids=ids, logits_to_keep=len(gen)).logits[0])


def main():
    torch.set_num_threads(2)
    t0 = time.time()
    model, tok = load_model_and_tokenizer()
    ftok = file_tokenizer(tok)
    print(f"loaded in {time.time() - t0:.1f}s", flush=True)
    assert model.config.tie_word_embeddings
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    qk_check = check_qk_unpermute(model)

    cases = []
    for name, kind, payload in CASES:
        if kind == "chat":
            text = tok.apply_chat_template(payload, add_generation_prompt=True, tokenize=False)
            hf_ids = list(tok.apply_chat_template(payload, add_generation_prompt=True)["input_ids"])
        else:
            text = payload
            hf_ids = tok(text)["input_ids"]
        ids = ftok.encode(text, add_special_tokens=False).ids
        case = {"name": name, "kind": kind}
        if kind == "chat":
            case["messages"] = payload
        case["text"] = text
        case["prompt_ids"] = ids
        case["n_prompt"] = len(ids)
        case["transformers_gguf_tokenizer_agrees"] = hf_ids == ids
        cases.append(case)

    # ---- float32 reference --------------------------------------------------------------------
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
                steps.append({
                    "step": s,
                    "ids": top.indices.tolist(),
                    "logits": [f32(v) for v in top.values],
                    "logprobs": [f32(lp[i]) for i in top.indices],
                })
        case["top1_top2_gap"] = gaps
        case["near_tie_steps"] = [s for s, g in enumerate(gaps) if g < NEAR_TIE]
        case["topk"] = steps
        print(f"fp32 {case['name']:18s} n={case['n_prompt']:5d} {time.time() - t:6.1f}s "
              f"min_gap={min(gaps):.2e} {case['greedy_text'][:60]!r}", flush=True)

    # ---- float64 re-run (teacher forced with the float32 tokens) ------------------------------
    make_fp64(model)
    noise = {"max_abs_logprob_diff_top10": 0.0, "max_abs_logit_diff_top10": 0.0,
             "max_abs_gap_diff": 0.0, "argmax_differs": [], "per_case": {}}
    for case in cases:
        t = time.time()
        rows64 = teacher_forced(model, case["prompt_ids"], case["greedy_ids"])
        worst_lp = worst_logit = worst_gap = 0.0
        for s, (r32, r64) in enumerate(zip(rows32[case["name"]], rows64)):
            r32d = r32.double()
            ids = torch.topk(r32, TOPK).indices
            lp32 = torch.log_softmax(r32, -1)[ids].double()  # as stored
            lp64 = torch.log_softmax(r64, -1)[ids]
            worst_lp = max(worst_lp, float((lp64 - lp32).abs().max()))
            worst_logit = max(worst_logit, float((r64[ids] - r32d[ids]).abs().max()))
            top2 = torch.topk(r64, 2).values
            worst_gap = max(worst_gap, abs(float(top2[0] - top2[1]) - case["top1_top2_gap"][s]))
            if int(torch.argmax(r64)) != case["greedy_ids"][s]:
                noise["argmax_differs"].append({"case": case["name"], "step": s,
                                                "gap_fp32": case["top1_top2_gap"][s]})
            if s < N_TOPK_STEPS:
                case["topk"][s]["logprobs_fp64"] = [f32(v) for v in torch.log_softmax(r64, -1)[ids]]
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
    noise["note"] = ("float64 run: model.double() plus RMSNorm and RoPE tables in float64, SDPA "
                     "attention; fed the float32 greedy tokens. Diffs are over all 32 steps, at the "
                     "float32 top-10 ids of each step.")

    sha = hashlib.sha256((MODELS / GGUF_NAME).read_bytes()).hexdigest()
    result = {
        "generator": "tests/golden/forward/make_smollm2_golden.py",
        "tool_versions": tool_versions(),
        "model": {"file": f"models/{GGUF_NAME}", "sha256": sha,
                  "loader": "AutoModelForCausalLM.from_pretrained(models_dir, gguf_file=..., "
                            "dtype=torch.float32, attn_implementation='sdpa')",
                  "tie_word_embeddings": True, "qk_unpermute_check": qk_check},
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
            "bos": "no BOS is added (tokenizer.ggml.add_bos_token = false); chat prompts start with "
                   "<|im_start|> (id 1, which is also the GGUF's bos_token_id) from the template",
            "tokenizer": "transformers' GGUF tokenizer plus the per-digit split of "
                         "tokenizer.ggml.pre = 'smollm'; transformers_gguf_tokenizer_agrees tells "
                         "whether transformers' own conversion gives the same ids",
        },
        "fp32_vs_fp64": noise,
        "cases": cases,
    }
    write_json(OUT, result)
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size} bytes) in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
