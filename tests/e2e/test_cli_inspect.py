"""`pagoda inspect` on the real default model, checked against the PyPI `gguf` package's reader."""
import gguf
import pytest


@pytest.fixture(scope="module")
def reference(default_model):
    return gguf.GGUFReader(str(default_model))


@pytest.fixture(scope="module")
def inspected(run_pagoda_json, default_model):
    return run_pagoda_json("inspect", default_model, "--json")


def field(reader, key):
    f = reader.fields[key]
    return f.contents()


def test_config_matches_gguf_metadata(inspected, reference):
    arch = field(reference, "general.architecture")
    c = inspected["config"]
    assert c["architecture"] == arch
    assert c["num_hidden_layers"] == field(reference, f"{arch}.block_count")
    assert c["hidden_size"] == field(reference, f"{arch}.embedding_length")
    assert c["intermediate_size"] == field(reference, f"{arch}.feed_forward_length")
    assert c["num_attention_heads"] == field(reference, f"{arch}.attention.head_count")
    assert c["num_key_value_heads"] == field(reference, f"{arch}.attention.head_count_kv")
    assert c["max_position_embeddings"] == field(reference, f"{arch}.context_length")
    assert c["rope_theta"] == pytest.approx(field(reference, f"{arch}.rope.freq_base"))
    assert c["vocab_size"] == len(field(reference, "tokenizer.ggml.tokens"))
    assert c["bos_token_id"] == field(reference, "tokenizer.ggml.bos_token_id")
    names = {t.name for t in reference.tensors}
    assert c["tie_word_embeddings"] == ("output.weight" not in names)
    assert inspected["has_chat_template"] == ("tokenizer.chat_template" in reference.fields)


def test_every_tensor_matches_gguf(inspected, reference):
    ours = inspected["tensors"]
    assert len(ours) == len(reference.tensors)
    for mine, theirs in zip(ours, reference.tensors):
        assert mine["name"] == theirs.name
        assert mine["type"] == theirs.tensor_type.name
        # gguf lists dimensions fastest-moving first; Pagoda prints them outermost first.
        assert mine["shape"] == [int(d) for d in reversed(theirs.shape)]


def test_text_summary_names_the_essentials(run_pagoda, default_model):
    proc = run_pagoda("inspect", default_model)
    assert proc.returncode == 0, proc.stderr
    for expected in ("architecture:       llama", "layers:             30",
                     "tokenizer:          gpt2 (pre-tokenizer smollm)", "token_embd.weight"):
        assert expected in proc.stdout


def test_missing_model_is_a_clear_error(run_pagoda, tmp_path):
    proc = run_pagoda("inspect", tmp_path / "nope.gguf")
    assert proc.returncode == 1
    assert "nope.gguf" in proc.stderr and "pagoda: error:" in proc.stderr


def test_truncated_model_is_a_clear_error(run_pagoda, default_model, tmp_path):
    truncated = tmp_path / "truncated.gguf"
    with open(default_model, "rb") as f:
        truncated.write_bytes(f.read(1 << 20))
    proc = run_pagoda("inspect", truncated)
    assert proc.returncode == 1
    assert "truncated.gguf" in proc.stderr
    assert "Traceback" not in proc.stderr and "Aborted" not in proc.stderr


def test_folder_without_config_is_a_clear_error(run_pagoda, tmp_path):
    proc = run_pagoda("inspect", tmp_path)
    assert proc.returncode == 1
    assert str(tmp_path) in proc.stderr
