"""The second real model, Gemma 3 270M (models/gemma-3-270m/, fetched by scripts/setup.sh), through
the real binary: `pagoda tokenize` against HF tokenizers' ids, `pagoda chat-template` with Gemma 3's
template against Python jinja2, and `pagoda inspect` against transformers' config (golden data
from tests/golden/tokenizer, tests/golden/template and tests/golden/forward/make_gemma3_golden.py).
"""
import json
import os
import re

import pytest

from conftest import ROOT

GEMMA = ROOT / "models" / "gemma-3-270m" / "gemma-3-270m-q4_k_m.gguf"
GEMMA_TEMPLATE = ROOT / "tests" / "data" / "template" / "templates" / "google-gemma-3-it.jinja"
TOKENIZER_DATA = ROOT / "tests" / "data" / "tokenizer"
TEMPLATE_DATA = ROOT / "tests" / "data" / "template"
SAMPLE_EVERY = 20  # ~10 samples with BOS (each run loads the 262k vocabulary, ~1.5 s); the
#                   unit tests cover every line


@pytest.fixture(scope="module")
def gemma_model():
    if not GEMMA.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{GEMMA} is missing although CI=true; scripts/setup.sh fetches it")
        pytest.skip(f"{GEMMA} is missing; run scripts/setup.sh")
    return GEMMA


def expected_samples():
    with open(TOKENIZER_DATA / "expected" / "gemma3.jsonl", encoding="utf-8") as f:
        lines = [json.loads(line) for line in f]
    with open(TOKENIZER_DATA / "corpus.txt", encoding="utf-8", newline="") as f:
        corpus = f.read().split("\n")[:-1]
    with open(TOKENIZER_DATA / "corpus_multiline.jsonl", encoding="utf-8") as f:
        corpus += [json.loads(line) for line in f if line.strip()]
    samples = [s for s in lines[1:] if "i" in s and s["i"] < len(corpus) and "ids_added" in s]
    return [(corpus[s["i"]], s) for s in samples[::SAMPLE_EVERY] if "\0" not in corpus[s["i"]]]


@pytest.mark.parametrize("text,expected", expected_samples(), ids=lambda v: None)
def test_tokenize_matches_hf(run_pagoda_json, gemma_model, text, expected):
    ids = run_pagoda_json("tokenize", gemma_model, "--text", text)
    assert ids == expected["ids_added"]  # Gemma adds <bos>
    assert run_pagoda_json("tokenize", gemma_model, "--ids", json.dumps(ids)) == "<bos>" + expected["decoded"]


def gemma_chat_cases():
    golden = json.loads((TEMPLATE_DATA / "chat_golden.json").read_text(encoding="utf-8"))
    conversations = {c["name"]: c for c in
                     json.loads((TEMPLATE_DATA / "conversations.json").read_text(encoding="utf-8"))}
    return [(conversations[c["conversation"]], c) for c in golden["cases"]
            if c["template"] == GEMMA_TEMPLATE.name and c["conversation"] in conversations]


@pytest.mark.parametrize("conversation,case", gemma_chat_cases(),
                         ids=lambda v: v.get("name") if isinstance(v, dict) and "name" in v else None)
def test_chat_template_matches_jinja2(run_pagoda, gemma_model, conversation, case):
    args = ["chat-template", gemma_model, "--chat-template", GEMMA_TEMPLATE,
            "--messages", json.dumps(conversation["messages"])]
    if conversation.get("tools") is not None:
        args += ["--tools", json.dumps(conversation["tools"])]
    if conversation.get("kwargs"):
        args += ["--kwargs", json.dumps(conversation["kwargs"])]
    if not conversation.get("add_generation_prompt", False):
        args.append("--no-generation-prompt")
    proc = run_pagoda(*args)
    if "error" in case:
        assert proc.returncode == 1 and case["error"] in proc.stderr, proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == case["output"]


def number(x):
    """How inspect prints a number: integral values without a decimal point."""
    return str(int(x)) if float(x).is_integer() else str(x)


def test_inspect_matches_transformers_config(run_pagoda, gemma_model):
    golden = json.loads((ROOT / "tests" / "data" / "forward" / "gemma3_greedy.json").read_text())
    cfg = golden["model"]["config"]
    proc = run_pagoda("inspect", gemma_model)
    assert proc.returncode == 0, proc.stderr
    full = ",".join(str(i) for i, t in enumerate(cfg["layer_types"]) if t == "full_attention")
    for line in (f"layers:             {cfg['num_hidden_layers']}",
                 f"hidden size:        {cfg['hidden_size']}",
                 f"intermediate size:  {cfg['intermediate_size']}",
                 f"attention heads:    {cfg['num_attention_heads']} (kv heads "
                 f"{cfg['num_key_value_heads']}, head dim {cfg['head_dim']})",
                 f"vocab size:         {cfg['vocab_size']}",
                 f"rope theta:         {number(cfg['rope_theta']['full_attention'])} (scaling none)",
                 f"sliding window:     {cfg['sliding_window']} (full layers {full}; local rope theta "
                 f"{number(cfg['rope_theta']['sliding_attention'])})",
                 f"query scale:        {number(cfg['query_pre_attn_scalar'])}^-1/2"):
        assert line + "\n" in proc.stdout, proc.stdout


def kv_layer_blocks(stderr):
    """generate's `kv cache: N blocks of B tokens, L layers each, block tables: T` as (N * L, T)."""
    match = re.search(r"kv cache: (\d+) blocks of \d+ tokens, (\d+) layers each, block tables: (\d+)",
                      stderr)
    assert match, stderr
    return int(match[1]) * int(match[2]), int(match[3])


def test_generate_keeps_the_sliding_window_and_the_tokens(run_pagoda, gemma_model):
    """`pagoda generate` on Gemma 3's KV groups (a ring of the window's blocks per sliding group,
    docs/kv_cache_groups.md) writes the greedy text of one table for every layer
    (--disable-hybrid-kv-cache-manager) in less KV memory once the sequence outgrows a prefill
    chunk and the window (1,500 prompt tokens, chunks of 512, window 512)."""
    prompt = " ".join(f"Line {i}: the quick brown fox jumps over the lazy dog." for i in range(110))
    args = ["generate", gemma_model, "--prompt", prompt, "--temperature", "0", "--max-tokens", "8",
            "--ignore-eos", "--device", "cpu"]
    grouped = run_pagoda(*args, timeout=300)
    single = run_pagoda(*args, "--disable-hybrid-kv-cache-manager", timeout=300)
    assert grouped.returncode == 0, grouped.stderr
    assert single.returncode == 0, single.stderr
    assert grouped.stdout == single.stdout
    grouped_blocks, grouped_tables = kv_layer_blocks(grouped.stderr)
    single_blocks, single_tables = kv_layer_blocks(single.stderr)
    assert (grouped_tables, single_tables) == (6, 1)  # 3 full layers, 15 sliding in groups of 3
    assert grouped_blocks < 0.8 * single_blocks, (grouped_blocks, single_blocks)
