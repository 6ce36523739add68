"""Prompt logprobs over HTTP on the real default model: /v1/completions with echo and logprobs
(OpenAI's shape, what lm-evaluation-harness sends for loglikelihood requests), vLLM's
prompt_logprobs, max_tokens 0 with echo, token-id and batched prompts, chunked prefill and a warm
prefix cache, and /tokenizer_info.

Golden: tests/data/forward/smollm2_greedy.json (tests/golden/forward/make_smollm2_golden.py)
holds transformers' float32 logprobs of each greedy token given the prompt and the greedy tokens
before it, on the same GGUF weights. Sending prompt + greedy ids as the prompt makes those the
prompt logprobs of the greedy positions. Tolerance 1e-2: docs/quantization.md's CPU fidelity
rule (int16 activations move logprobs up to ~4.7e-3 from transformers'; top-10 within 1e-2)."""
import json
import math

import pytest

from conftest import ROOT

GREEDY = json.loads((ROOT / "tests" / "data" / "forward" / "smollm2_greedy.json").read_text())
CASES = [c for c in GREEDY["cases"] if c["kind"] == "text"][:4]
TOLERANCE = 1e-2
STEPS = 12  # greedy steps scored per case


def scored_prompt(case):
    """prompt ids + the first STEPS greedy ids, and per greedy step its golden logprob."""
    ids = case["prompt_ids"] + case["greedy_ids"][:STEPS]
    golden = {}
    for entry in case["topk"]:
        k = entry["step"]
        if k < STEPS and entry["ids"][0] == case["greedy_ids"][k]:
            golden[len(case["prompt_ids"]) + k] = entry["logprobs"][0]
    return ids, golden


def check_against_golden(token_logprobs, golden):
    assert token_logprobs[0] is None
    assert golden, "no golden positions to compare"
    for pos, want in golden.items():
        assert abs(token_logprobs[pos] - want) <= TOLERANCE, (pos, token_logprobs[pos], want)


def completion(server, body):
    status, out = server.post_json("/v1/completions", body, timeout=120)
    assert status == 200, out
    return out


@pytest.mark.parametrize("max_tokens", [0, 1])
def test_echo_logprobs_match_transformers(server, model_name, max_tokens):
    for case in CASES:
        ids, golden = scored_prompt(case)
        out = completion(server, {"model": model_name, "prompt": ids, "max_tokens": max_tokens,
                                  "echo": True, "logprobs": 1, "temperature": 0})
        choice = out["choices"][0]
        lp = choice["logprobs"]
        n = len(ids) + max_tokens
        assert [len(lp[k]) for k in ("tokens", "token_logprobs", "top_logprobs", "text_offset")] \
            == [n] * 4
        check_against_golden(lp["token_logprobs"], golden)
        assert lp["top_logprobs"][0] is None
        # Each top map holds the best alternative and the token itself; the token's entry is its
        # logprob, and none beats the best.
        for pos in range(1, len(ids)):
            top = lp["top_logprobs"][pos]
            assert lp["tokens"][pos] in top and 1 <= len(top) <= 2
            assert top[lp["tokens"][pos]] == pytest.approx(lp["token_logprobs"][pos], abs=1e-6)
            assert max(top.values()) >= lp["token_logprobs"][pos] - 1e-6
        # The greedy tokens are the argmax: their top-1 is themselves.
        for pos in golden:
            assert max(lp["top_logprobs"][pos], key=lp["top_logprobs"][pos].get) == lp["tokens"][pos]
        # Offsets count code points of the token texts, which make up the echoed text.
        assert lp["text_offset"][0] == 0
        for a, b, tok in zip(lp["text_offset"], lp["text_offset"][1:], lp["tokens"]):
            assert b - a == len(tok)
        if max_tokens == 0:
            assert choice["text"] == "".join(lp["tokens"])
            assert out["usage"]["completion_tokens"] == 0
        assert out["usage"]["prompt_tokens"] == len(ids)


def test_batched_prompts_and_prompt_logprobs(server, model_name):
    prompts = [scored_prompt(c) for c in CASES]
    out = completion(server, {"model": model_name, "prompt": [p for p, _ in prompts],
                              "max_tokens": 1, "echo": True, "logprobs": 3, "prompt_logprobs": 5,
                              "temperature": 0})
    choices = sorted(out["choices"], key=lambda c: c["index"])
    assert len(choices) == len(prompts)
    for choice, (ids, golden) in zip(choices, prompts):
        check_against_golden(choice["logprobs"]["token_logprobs"], golden)
        assert all(len(t) <= 4 for t in choice["logprobs"]["top_logprobs"][1:])
        plp = choice["prompt_logprobs"]
        assert len(plp) == len(ids) and plp[0] is None
        for pos in range(1, len(ids)):
            entry = plp[pos]
            mine = entry[str(ids[pos])]
            assert mine["logprob"] == pytest.approx(
                choice["logprobs"]["token_logprobs"][pos], abs=1e-6)
            ranks = sorted(e["rank"] for e in entry.values())
            assert len(entry) in (5, 6) and ranks[:5] == [1, 2, 3, 4, 5]
            assert sum(math.exp(e["logprob"]) for e in entry.values()) <= 1.0 + 1e-4
        for pos in golden:
            assert plp[pos][str(ids[pos])]["rank"] == 1


def test_chunked_prefill_and_prefix_cache(start_server, model_name):
    # Small step budget: a prompt runs in several chunks, each scored in its own step.
    srv = start_server("--max-model-len", "1024", "--max-num-batched-tokens", "16",
                       "--served-model-name", model_name)
    case = CASES[0]
    ids, golden = scored_prompt(case)
    long_ids = ids * 4  # whole blocks to cache, several chunks
    body = {"model": model_name, "prompt": long_ids, "max_tokens": 1, "echo": True,
            "logprobs": 0, "temperature": 0}
    first = completion(srv, body)["choices"][0]["logprobs"]["token_logprobs"]
    check_against_golden(first, golden)
    # Again, with its prefix now cached: the same answer (a cache hit would skip positions).
    again = completion(srv, body)
    assert again["choices"][0]["logprobs"]["token_logprobs"] == first
    assert again["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0) in (0, None)


def test_streaming_echo_logprobs(server, model_name):
    case = CASES[1]
    ids, golden = scored_prompt(case)
    import urllib.request
    req = urllib.request.Request(server.url("/v1/completions"), method="POST",
                                 headers={"Content-Type": "application/json"},
                                 data=json.dumps({"model": model_name, "prompt": ids,
                                                  "max_tokens": 2, "echo": True, "logprobs": 1,
                                                  "temperature": 0, "stream": True}).encode())
    with urllib.request.urlopen(req, timeout=60) as resp:
        body = resp.read().decode()
    chunks = [json.loads(b[len("data: "):]) for b in body.split("\n\n")
              if b.startswith("data: ") and b != "data: [DONE]"]
    token_logprobs = []
    for c in chunks:
        token_logprobs += c["choices"][0]["logprobs"]["token_logprobs"]
    assert len(token_logprobs) == len(ids) + 2
    check_against_golden(token_logprobs, golden)


def test_tokenizer_info(server):
    status, _, body = server.get("/tokenizer_info")
    assert status == 200
    info = json.loads(body)
    assert info["eos_token"] == "<|im_end|>"
    assert info["model_max_length"] == 1024
    assert "{{" in info["chat_template"]
    # lm-evaluation-harness's remote tokenizer: eos_token's id through /tokenize.
    status, out = server.post_json("/tokenize", {"prompt": info["eos_token"],
                                                 "add_special_tokens": False})
    assert status == 200 and len(out["tokens"]) >= 1


def test_bad_values(server, model_name):
    for body, param in [({"prompt_logprobs": 21}, "prompt_logprobs"),
                        ({"prompt_logprobs": -1}, "prompt_logprobs"),
                        ({"max_tokens": 0}, "max_tokens")]:
        status, out = server.post_json("/v1/completions",
                                       {"model": model_name, "prompt": "Hi", **body})
        assert status == 400, out
        assert out["error"]["param"] == param
