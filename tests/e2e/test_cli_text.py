"""`pagoda tokenize` and `pagoda chat-template` on the real default model, against golden data made
by the reference tools (tests/golden/tokenizer, tests/golden/template)."""
import json

import pytest

from conftest import ROOT

TOKENIZER_DATA = ROOT / "tests" / "data" / "tokenizer"
TEMPLATE_DATA = ROOT / "tests" / "data" / "template"
SAMPLE_EVERY = 37  # ~60 corpus samples keep this suite fast; the unit tests cover every line


def expected_samples():
    # The GGUF path follows the file's pre-tokenizer "smollm" (per-digit split): see
    # tests/golden/tokenizer/make_golden.py, step 4.
    with open(TOKENIZER_DATA / "expected" / "smollm2_digits.jsonl", encoding="utf-8") as f:
        lines = [json.loads(line) for line in f]
    with open(TOKENIZER_DATA / "corpus.txt", encoding="utf-8", newline="") as f:
        corpus = f.read().split("\n")[:-1]
    with open(TOKENIZER_DATA / "corpus_multiline.jsonl", encoding="utf-8") as f:
        corpus += [json.loads(line) for line in f if line.strip()]
    samples = [s for s in lines[1:] if "i" in s and s["i"] < len(corpus)]
    return [(corpus[s["i"]], s) for s in samples[::SAMPLE_EVERY] if "\0" not in corpus[s["i"]]]


@pytest.mark.parametrize("text,expected", expected_samples(), ids=lambda v: None)
def test_tokenize_matches_hf(run_pagoda_json, default_model, text, expected):
    ids = run_pagoda_json("tokenize", default_model, "--text", text)
    assert ids == (expected["ids_added"] if "ids_added" in expected else expected["ids"])
    assert run_pagoda_json("tokenize", default_model, "--ids", json.dumps(ids)) == expected["decoded"]


def test_special_token_text_can_be_plain(run_pagoda_json, default_model):
    special = run_pagoda_json("tokenize", default_model, "--text", "<|im_start|>")
    plain = run_pagoda_json("tokenize", default_model, "--text", "<|im_start|>",
                            "--plain-special-text")
    assert special == [1]
    assert len(plain) > 1 and 1 not in plain


def smollm2_chat_cases():
    golden = json.loads((TEMPLATE_DATA / "chat_golden.json").read_text(encoding="utf-8"))
    conversations = {c["name"]: c for c in
                     json.loads((TEMPLATE_DATA / "conversations.json").read_text(encoding="utf-8"))}
    return [(conversations[c["conversation"]], c) for c in golden["cases"]
            if c["template"].startswith("SmolLM2") and c["conversation"] in conversations]


@pytest.mark.parametrize("conversation,case", smollm2_chat_cases(),
                         ids=lambda v: v.get("name") if isinstance(v, dict) and "name" in v else None)
def test_chat_template_matches_jinja2(run_pagoda, default_model, conversation, case):
    args = ["chat-template", default_model, "--messages", json.dumps(conversation["messages"])]
    if conversation.get("tools") is not None:
        args += ["--tools", json.dumps(conversation["tools"])]
    if conversation.get("kwargs"):
        args += ["--kwargs", json.dumps(conversation["kwargs"])]
    if not conversation.get("add_generation_prompt", False):
        args.append("--no-generation-prompt")
    proc = run_pagoda(*args)
    if "error" in case:
        assert proc.returncode == 1 and "pagoda: error:" in proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == case["output"]
