"""bench/peer/make_q4_k_m_gguf.py, the random Q4_K_M GGUF that stands in for an 8B checkpoint on a
GPU (scripts/gpu_session.sh measures its memory and decode): its layout against llama-quantize's
(tests/data/quant/q4_k_m_layout.json, made by tests/golden/quant/make_q4_k_m_layout.py), its
blocks through the gguf package's own dequantizer, and the file through `pagoda generate`."""
import json
import subprocess
import sys

import gguf
import numpy as np
import pytest
from gguf import quants

from conftest import ROOT

MAKER = ROOT / "bench" / "peer" / "make_q4_k_m_gguf.py"
GOLDEN = json.loads((ROOT / "tests" / "data" / "quant" / "q4_k_m_layout.json").read_text())


def make(*args):
    return subprocess.run([sys.executable, str(MAKER), *map(str, args)], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_layout_is_the_one_llama_quantize_chooses(case, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(GOLDEN[case]["config"]))
    proc = make("--types", config)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == GOLDEN[case]["types"]


@pytest.fixture(scope="module")
def small_model(tmp_path_factory, default_model):
    """Two layers of the golden shape with an output matrix of its own (Q6_K) and the default
    model's tokenizer."""
    folder = tmp_path_factory.mktemp("q4_k_m")
    config = folder / "config.json"
    config.write_text(json.dumps(dict(GOLDEN["layers32_untied"]["config"], num_hidden_layers=2)))
    out = folder / "model.gguf"
    proc = make(config, out, "--tokenizer-from", default_model)
    assert proc.returncode == 0, proc.stderr
    return out


def test_blocks_are_zero_mean_weights_at_a_trained_models_scale(small_model):
    seen = set()
    for tensor in gguf.GGUFReader(small_model).tensors:
        if tensor.tensor_type not in (gguf.GGMLQuantizationType.Q4_K,
                                      gguf.GGMLQuantizationType.Q6_K):
            continue
        values = quants.dequantize(tensor.data, tensor.tensor_type)
        assert np.isfinite(values).all(), tensor.name
        assert abs(values.mean()) < 0.05 * values.std(), tensor.name
        assert 0.015 < values.std() < 0.025, tensor.name
        seen.add(tensor.tensor_type.name)
    assert seen == {"Q4_K", "Q6_K"}


def test_pagoda_reads_the_file_and_generates(run_pagoda, small_model):
    proc = run_pagoda("generate", small_model, "--device", "cpu", "--prompt", "Hello there",
                      "--max-tokens", 4, "--temperature", 0, "--ignore-eos")
    assert proc.returncode == 0, proc.stderr
    assert "generated tokens: 4" in proc.stderr


def test_a_tokenizer_larger_than_the_vocabulary_is_refused(tmp_path, default_model):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(dict(GOLDEN["layers32_untied"]["config"], num_hidden_layers=1,
                                      vocab_size=32000)))
    proc = make(config, tmp_path / "model.gguf", "--tokenizer-from", default_model)
    assert proc.returncode != 0
    assert "49152 tokens" in proc.stderr
    assert list(tmp_path.iterdir()) == [config]


def test_a_smaller_tokenizer_leaves_padding_rows(run_pagoda, tmp_path, default_model):
    """Llama 3's vocabulary with the default model's 49,152 tokens: the file holds all 128,256
    rows, and pagoda reads it (sampled ids past the tokenizer decode to nothing)."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps(dict(GOLDEN["layers32_untied"]["config"], num_hidden_layers=1,
                                      vocab_size=128256)))
    out = tmp_path / "model.gguf"
    proc = make(config, out, "--tokenizer-from", default_model)
    assert proc.returncode == 0, proc.stderr
    shapes = {t.name: [int(d) for d in t.shape] for t in gguf.GGUFReader(out).tensors}
    assert shapes["token_embd.weight"] == [256, 128256]
    assert shapes["output.weight"] == [256, 128256]
    proc = run_pagoda("generate", out, "--device", "cpu", "--prompt", "Hello", "--max-tokens", 4,
                      "--temperature", 0, "--ignore-eos")
    assert proc.returncode == 0, proc.stderr
    assert "generated tokens: 4" in proc.stderr
