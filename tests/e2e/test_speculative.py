"""Speculative decoding end to end: `pagoda serve --speculative-config` on the default model gives
greedy answers identical to the server without it (text, finish reason, usage, stop strings
included), counts its drafts in /metrics under vLLM's names, and refuses a bad config at startup
with a message that names the problem (flag and PAGODA_SPECULATIVE_CONFIG alike)."""
import json
import os
import subprocess

import pytest

from conftest import serve_has_grpc

NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2,
         "prompt_lookup_max": 4}

PASSAGE = ("The library kept its rare maps in a cool room on the third floor. Visitors had to "
           "wear cotton gloves, sign a register and leave their bags at the desk.")


@pytest.fixture(scope="module")
def spec_server(start_server):
    return start_server("--max-model-len", "1024", "--served-model-name", "smollm2",
                        "--step-time-target-ms", "0",
                        "--speculative-config", json.dumps(NGRAM))


def chat(server, **fields):
    body = {"model": "smollm2", "temperature": 0, "max_tokens": 48,
            "messages": [{"role": "user",
                          "content": "Repeat the following text exactly:\n\n" + PASSAGE}],
            **fields}
    status, response = server.post_json("/v1/chat/completions", body)
    assert status == 200, response
    choice = response["choices"][0]
    # cached_tokens depends on what each server saw before (the plain server is shared with other
    # test files), not on speculation: compare the token counts only.
    usage = {k: v for k, v in response["usage"].items() if k != "prompt_tokens_details"}
    return choice["message"]["content"], choice["finish_reason"], usage


def test_greedy_answers_match_the_server_without_speculation(server, spec_server):
    plain = chat(server)
    assert chat(spec_server) == plain
    # Stops that land inside accepted drafts: a stop string and a short max_tokens.
    text = plain[0]
    assert len(text) > 30, text
    for fields in ({"stop": [text[20:24]]}, {"max_tokens": 7}):
        expected = chat(server, **fields)
        assert chat(spec_server, **fields) == expected, fields
    assert chat(spec_server, stop=[text[20:24]])[1] == "stop"


def spec_counters(server):
    """The speculation counters from one scrape of /metrics (one consistent snapshot)."""
    counters = {"per_pos": {}}
    for (name, labels), value in server.samples().items():
        short = name.removeprefix("pagoda:spec_decode_")
        if short == "num_accepted_tokens_per_pos_total":
            counters["per_pos"][int(dict(labels)["position"])] = value
        elif short in ("num_drafts_total", "num_draft_tokens_total", "num_accepted_tokens_total"):
            counters[short.removesuffix("_total")] = value
    return counters


def test_metrics_count_drafts_and_accepted_tokens(spec_server):
    before = spec_counters(spec_server)
    chat(spec_server)
    # /metrics may lag the response by one engine step; the chat ran several verifications.
    after = spec_counters(spec_server)
    assert after["num_drafts"] > before["num_drafts"]
    drafts, draft_tokens, accepted = (after["num_drafts"], after["num_draft_tokens"],
                                      after["num_accepted_tokens"])
    assert drafts > 0 and draft_tokens >= drafts
    assert 0 < accepted <= draft_tokens
    per_pos = after["per_pos"]
    assert sorted(per_pos) == [0, 1, 2, 3]
    assert sum(per_pos.values()) == accepted
    # Acceptance can only fall with the position: a draft is accepted only after its predecessors.
    assert all(per_pos[i] >= per_pos[i + 1] for i in range(3))


def test_server_without_speculation_reports_zero_drafts(server):
    assert server.metric("pagoda:spec_decode_num_drafts_total") == 0


def no_grpc(pagoda_bin):
    return ["--grpc-port", "0"] if serve_has_grpc(pagoda_bin) else []


@pytest.mark.parametrize("config,fragment", [
    ("{method: ngram}", "not valid JSON"),
    ('{"method":"medusa"}', 'unknown method "medusa"'),
    ('{"method":"ngram","num_speculative_tokens":0}', "num_speculative_tokens"),
    ('{"method":"draft_model"}', 'needs "model"'),
])
def test_bad_config_is_a_clear_startup_error(run_pagoda, pagoda_bin, default_model, config,
                                             fragment):
    proc = run_pagoda("serve", default_model, "--port", "0", *no_grpc(pagoda_bin),
                      "--speculative-config", config)
    assert proc.returncode != 0
    assert fragment in proc.stdout + proc.stderr


def test_bad_config_from_the_environment_is_refused_too(pagoda_bin, default_model):
    env = dict(os.environ, PAGODA_SPECULATIVE_CONFIG='{"method":"ngram","prompt_lookup_min":0}')
    proc = subprocess.run([str(pagoda_bin), "serve", str(default_model), "--port", "0",
                           *no_grpc(pagoda_bin)], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode != 0
    assert "prompt_lookup_min" in proc.stdout + proc.stderr


def test_generate_with_draft_model_matches_plain_generate(run_pagoda, default_model):
    args = ["generate", default_model, "--prompt", "The capital of France is", "--max-tokens",
            "16", "--temperature", "0", "--device", "cpu", "--threads", "2"]
    plain = run_pagoda(*args)
    assert plain.returncode == 0, plain.stderr
    config = json.dumps({"method": "draft_model", "model": str(default_model),
                         "num_speculative_tokens": 3})
    spec = run_pagoda(*args, "--speculative-config", config)
    assert spec.returncode == 0, spec.stderr
    assert spec.stdout == plain.stdout
    assert "speculation:" in spec.stderr


def test_bad_config_from_the_yaml_config_is_refused_too(run_pagoda, pagoda_bin, default_model,
                                                        tmp_path):
    config = tmp_path / "serve.yaml"
    config.write_text("speculative-config: '{\"method\":\"ngram\",\"k\":4}'\n")
    proc = run_pagoda("serve", default_model, "--port", "0", *no_grpc(pagoda_bin), "--config",
                      config)
    assert proc.returncode != 0
    assert 'unknown key "k"' in proc.stdout + proc.stderr
