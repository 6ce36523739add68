"""Quantized checkpoints end to end: GPTQ, AWQ and compressed-tensors FP8 folders made from the
default model by tests/golden/quant/make_checkpoints.py, and `--quantization fp8|int4` at load,
scored by `pagoda perplexity` on a fixed text against the BF16 checkpoint of the same weights.

Margins (docs/perf/quantization.md has the full-text figures): FP8 per-channel costs ~3% of
perplexity on this 135M model, 4-bit RTN at group 128 ~31% (its Q4_1 source used groups of 32),
act-order with a random channel order ~56%. The bounds leave room above those and stay far below
what a broken kernel, scale, zero point or permutation gives (perplexity in the hundreds or more).
"""
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "golden" / "quant"))

import make_checkpoints  # noqa: E402

TEXT = ROOT / "tests" / "data" / "quant" / "perplexity_text.txt"
# Two windows of 512 tokens: 1022 scored tokens.
# The CPU's figures: on a machine with a GPU, perplexity would otherwise run on it.
WINDOW_ARGS = ("--ctx", "512", "--max-windows", "2", "--json", "--device", "cpu")
FP8_MARGIN = 1.06
INT4_MARGIN = 1.40
ACT_ORDER_MARGIN = 1.75


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, default_model):
    out = tmp_path_factory.mktemp("quantized")
    config, weights = make_checkpoints.read_gguf(default_model)
    for fmt in ("bf16", "gptq", "gptq_act", "awq", "fp8"):
        make_checkpoints.write_checkpoint(out / fmt, fmt, config, weights)
    return out


@pytest.fixture(scope="module")
def perplexity(run_pagoda_json):
    cache = {}

    def score(model, *flags):
        key = (str(model), flags)
        if key not in cache:
            cache[key] = run_pagoda_json("perplexity", model, "--text-file", TEXT, *flags,
                                         *WINDOW_ARGS)
        return cache[key]
    return score


def test_bf16_baseline_matches_the_gguf(perplexity, checkpoints, default_model):
    bf16 = perplexity(checkpoints / "bf16")
    gguf = perplexity(default_model)
    assert bf16["num_tokens"] == gguf["num_tokens"] == 1022
    # The BF16 folder holds the GGUF's dequantized weights rounded to bfloat16.
    assert bf16["perplexity"] == pytest.approx(gguf["perplexity"], rel=0.01)


def test_int4_formats_decode_the_same_weights(perplexity, checkpoints):
    # GPTQ (asym, g128), AWQ (g128) and `--quantization int4` hold the same RTN weights in three
    # packings; exact decoding makes their perplexities identical.
    gptq = perplexity(checkpoints / "gptq")
    awq = perplexity(checkpoints / "awq")
    rtn = perplexity(checkpoints / "bf16", "--quantization", "int4")
    assert gptq["quantization"] == "gptq 4-bit, group 128, asym"
    assert awq["quantization"] == "awq 4-bit, group 128, asym"
    assert gptq["perplexity"] == awq["perplexity"] == rtn["perplexity"]


def test_int4_within_margin_of_bf16(perplexity, checkpoints):
    base = perplexity(checkpoints / "bf16")["perplexity"]
    assert base < perplexity(checkpoints / "gptq")["perplexity"] < base * INT4_MARGIN
    act = perplexity(checkpoints / "gptq_act")
    assert act["quantization"] == "gptq 4-bit, group 128, sym, act-order"
    assert base < act["perplexity"] < base * ACT_ORDER_MARGIN


def test_fp8_within_margin_of_bf16(perplexity, checkpoints):
    base = perplexity(checkpoints / "bf16")["perplexity"]
    checkpoint = perplexity(checkpoints / "fp8")
    at_load = perplexity(checkpoints / "bf16", "--quantization", "fp8")
    assert checkpoint["quantization"] == "compressed-tensors E4M3, per-channel scales"
    for ppl in (checkpoint["perplexity"], at_load["perplexity"]):
        assert base * 0.99 < ppl < base * FP8_MARGIN
    # The two differ only in the scale's rounding (bf16 in the checkpoint, fp32 at load).
    assert checkpoint["perplexity"] == pytest.approx(at_load["perplexity"], rel=0.01)


def test_inspect_shows_the_quantization(run_pagoda_json, checkpoints):
    assert run_pagoda_json("inspect", checkpoints / "gptq_act", "--json")["quantization"] == \
        "gptq 4-bit, group 128, sym, act-order"
    assert run_pagoda_json("inspect", checkpoints / "bf16", "--json")["quantization"] == "none"


def test_fp16_kv_cache_keeps_perplexity(perplexity, checkpoints):
    # The CPU's fp16 KV cache rounds each K/V element once (relative 2^-11): perplexity moves by
    # far less than the 1% that would show a wrong conversion or a misread half of the pool.
    base = perplexity(checkpoints / "bf16")
    half = perplexity(checkpoints / "bf16", "--kv-cache-dtype", "fp16")
    assert base["kv_cache_dtype"] == "fp32" and half["kv_cache_dtype"] == "fp16"
    assert half["perplexity"] == pytest.approx(base["perplexity"], rel=0.01)


def test_int8_activations_cost_little_perplexity(perplexity, default_model):
    # --cpu-activations int8 rounds each matmul input of the GGUF's Q4_1/Q8_0 weights to 8 bits per
    # 32 columns (llama.cpp's Q8_0/Q8_1 precision) where the default keeps 16: +0.3% perplexity
    # on the full text (docs/perf/quantization.md). A wrong offset or scale in the int8 tile
    # gives hundreds; the JSON names what ran.
    base = perplexity(default_model)
    int8 = perplexity(default_model, "--cpu-activations", "int8")
    assert base["cpu_activations"] == "int16" and int8["cpu_activations"] == "int8"
    assert base["device"] == "cpu" and base["executor"].endswith(" threads")
    assert int8["perplexity"] != base["perplexity"]
    assert int8["perplexity"] == pytest.approx(base["perplexity"], rel=0.03)


def test_fp16_kv_cache_holds_twice_the_blocks(run_pagoda, default_model):
    # Through the engine (bench opens it like serve): the same --kv-cache-memory buys twice the
    # blocks when each element takes 2 bytes instead of 4.
    def blocks(kv):
        proc = run_pagoda("bench", "offline", default_model, "--device", "cpu", "--num-prompts", "2",
                          "--input-len", "8", "--output-len", "4", "--no-single-stream",
                          "--kv-cache-memory", str(64 << 20), "--kv-cache-dtype", kv)
        assert proc.returncode == 0, proc.stderr
        return int(re.search(r"(\d+) KV blocks", proc.stdout).group(1))
    assert blocks("fp16") == 2 * blocks("auto")


@pytest.mark.parametrize("flags, message", [
    (("--quantization", "int3"), "--quantization \"int3\" is not supported"),
    (("--kv-cache-dtype", "fp8"), "--kv-cache-dtype fp8 is for the GPU"),
    (("--kv-cache-dtype", "int8"), "--kv-cache-dtype \"int8\" is not supported; use auto or fp16"),
])
def test_bad_flags_are_clear_errors(run_pagoda, checkpoints, flags, message):
    proc = run_pagoda("perplexity", checkpoints / "bf16", "--text-file", TEXT, *flags)
    assert proc.returncode != 0
    assert message in proc.stderr


def test_quantizing_a_quantized_checkpoint_is_refused(run_pagoda, checkpoints):
    proc = run_pagoda("generate", checkpoints / "gptq", "--prompt", "Hi", "--max-tokens", "1",
                      "--device", "cpu", "--quantization", "fp8")
    assert proc.returncode != 0
    assert "is already quantized (gptq 4-bit, group 128, asym); drop --quantization fp8" in \
        proc.stderr


def test_unsupported_config_names_the_key(run_pagoda, checkpoints, tmp_path):
    bad = tmp_path / "gptq8"
    shutil.copytree(checkpoints / "gptq", bad)
    config = json.loads((bad / "config.json").read_text())
    config["quantization_config"]["bits"] = 8
    (bad / "config.json").write_text(json.dumps(config))
    proc = run_pagoda("inspect", bad)
    assert proc.returncode != 0
    assert "\"quantization_config.bits\" = 8 is not supported (only 4-bit GPTQ)" in proc.stderr


def test_packed_weights_without_a_config_are_refused(run_pagoda, checkpoints, tmp_path):
    bad = tmp_path / "no_config"
    shutil.copytree(checkpoints / "gptq", bad)
    config = json.loads((bad / "config.json").read_text())
    del config["quantization_config"]
    (bad / "config.json").write_text(json.dumps(config))
    proc = run_pagoda("generate", bad, "--prompt", "Hi", "--max-tokens", "1", "--device", "cpu")
    assert proc.returncode != 0
    assert "model.layers.0.self_attn.q_proj.qweight is a packed 4-bit weight, but config.json's " \
        "quantization_config does not say gptq or awq" in proc.stderr
