"""`pagoda serve` on a model that has no weights (issue 27): a tiny config.json written here, with
`--load-format dummy` (random weights of its shapes, on the CPU) and the default model's tokenizer
through `--tokenizer`. The config's vocabulary (50000) is larger than the tokenizer's (49152), as
an 8B Llama config with SmolLM2's tokenizer is: ids the tokenizer lacks are accepted in prompts
(they are the model's), decode to nothing when sampled, and never fail the request. Also the
start-up line and the flag errors."""
import json

import pytest

from conftest import DEFAULT_MODEL, launch_server

MODEL_VOCAB = 50000
TOKENIZER_VOCAB = 49152
CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "vocab_size": MODEL_VOCAB, "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False,
    "bos_token_id": 1, "eos_token_id": 2,
}


@pytest.fixture(scope="module")
def config_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("dummy") / "tiny-llama.json"
    path.write_text(json.dumps(CONFIG))
    return path


@pytest.fixture(scope="module")
def dummy_server(pagoda_bin, default_model, config_path):
    server = launch_server(pagoda_bin, config_path, "--load-format", "dummy", "--tokenizer",
                           default_model, "--device", "cpu", "--max-model-len", "256",
                           "--served-model-name", "tiny", "--disable-log-requests",
                           "--enforce-eager")
    yield server
    server.stop()


def complete(server, prompt, **fields):
    body = {"model": "tiny", "prompt": prompt, "max_tokens": 12, "temperature": 0,
            "ignore_eos": True, **fields}
    return server.post_json("/v1/completions", body)


def test_text_prompt_gets_max_tokens_back_with_usage(dummy_server):
    status, tokenized = dummy_server.post_json("/tokenize", {"model": "tiny", "prompt": "Hello"})
    assert status == 200, tokenized
    status, response = complete(dummy_server, "Hello")
    assert status == 200, response
    choice = response["choices"][0]
    assert choice["finish_reason"] == "length"
    assert response["usage"]["completion_tokens"] == 12
    assert response["usage"]["prompt_tokens"] == tokenized["count"]
    assert response["usage"]["total_tokens"] == tokenized["count"] + 12


def test_token_ids_past_the_tokenizer_but_inside_the_model_are_accepted(dummy_server):
    prompt = [1, TOKENIZER_VOCAB, MODEL_VOCAB - 1, 500]
    status, response = complete(dummy_server, prompt, max_tokens=5)
    assert status == 200, response
    assert response["usage"]["prompt_tokens"] == 4
    assert response["usage"]["completion_tokens"] == 5

    status, error = complete(dummy_server, [1, MODEL_VOCAB])
    assert status == 400, error
    assert str(MODEL_VOCAB) in error["error"]["message"]


def test_sampled_ids_the_tokenizer_lacks_decode_to_nothing(dummy_server):
    # The bias makes every greedy draw id 49500, which only the model has.
    for stream in (False, True):
        body = {"model": "tiny", "prompt": "Hi", "max_tokens": 6, "temperature": 0,
                "ignore_eos": True, "logit_bias": {"49500": 100}}
        if not stream:
            status, response = dummy_server.post_json("/v1/completions", body)
            assert status == 200, response
            assert response["choices"][0]["text"] == ""
            assert response["usage"]["completion_tokens"] == 6
            continue
        import openai
        client = openai.OpenAI(base_url=dummy_server.url("/v1"), api_key="unused", max_retries=0)
        chunks = list(client.completions.create(
            model="tiny", prompt="Hi", max_tokens=6, temperature=0, stream=True,
            extra_body={"ignore_eos": True}, logit_bias={"49500": 100},
            stream_options={"include_usage": True}))
        assert "".join(c.choices[0].text for c in chunks if c.choices) == ""
        assert chunks[-1].usage.completion_tokens == 6


def test_startup_line_lists_the_phases(dummy_server):
    lines = [l for l in dummy_server.log().splitlines() if l.startswith("startup:")]
    assert len(lines) == 1, dummy_server.log()
    line = lines[0]
    for phase in ("tokenizer", "weights", "kv cache", "total"):
        assert phase + " " in line, line
    assert "cuda graphs" not in dummy_server.log()  # the CPU has none


@pytest.mark.parametrize("flags, message", [
    (["--load-format", "bogus"], "--load-format must be auto or dummy"),
    (["--load-format", "dummy", "--tokenizer", "/nonexistent/tokenizer"],
     "--tokenizer /nonexistent/tokenizer: no such file or folder"),
])
def test_bad_load_flags_fail_at_startup(run_pagoda, config_path, flags, message):
    proc = run_pagoda("serve", config_path, "--device", "cpu", "--port", "0", *flags)
    assert proc.returncode == 1
    assert message in proc.stderr


def test_config_without_a_tokenizer_says_to_pass_one(run_pagoda, config_path):
    proc = run_pagoda("generate", config_path, "--load-format", "dummy", "--device", "cpu",
                      "--prompt", "Hi")
    assert proc.returncode == 1
    assert "pass --tokenizer" in proc.stderr


def test_generate_and_bench_take_the_flags(run_pagoda, config_path):
    proc = run_pagoda("generate", config_path, "--load-format", "dummy", "--tokenizer",
                      DEFAULT_MODEL, "--device", "cpu", "--prompt", "Hi", "--max-tokens", "4",
                      "--ignore-eos", "--temperature", "0", "--max-model-len", "64")
    assert proc.returncode == 0, proc.stderr
    assert "generated tokens: 4" in proc.stderr
    proc = run_pagoda("bench", "offline", config_path, "--load-format", "dummy", "--tokenizer",
                      DEFAULT_MODEL, "--device", "cpu", "--num-prompts", "2", "--input-len", "8",
                      "--output-len", "4", "--no-single-stream", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("startup:") == 1, proc.stderr


def test_speculation_on_dummy_weights_keeps_greedy_output(run_pagoda, config_path):
    # The draft model may be the config itself: with --load-format dummy it gets the target's
    # random weights (same seed), so it drafts what the target would say.
    def generate(*extra):
        proc = run_pagoda("generate", config_path, "--load-format", "dummy", "--tokenizer",
                          DEFAULT_MODEL, "--device", "cpu", "--prompt",
                          "one two three one two three one two", "--max-tokens", "24",
                          "--ignore-eos", "--temperature", "0", "--max-model-len", "128", *extra,
                          timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc
    plain = generate()
    ngram = generate("--speculative-config",
                     '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_min":1}')
    draft = generate("--speculative-config", json.dumps(
        {"method": "draft_model", "model": str(config_path), "num_speculative_tokens": 3}))
    assert ngram.stdout == plain.stdout
    assert draft.stdout == plain.stdout
    assert "speculation:" in draft.stderr
    accepted = draft.stderr.split("speculation:")[1]
    assert " 0 accepted" not in accepted, draft.stderr
