"""--device, --dtype and --gpu-memory-utilization on `serve`, `bench offline`, `generate` and
`perplexity`: the refusals a machine without a GPU can check (CI has none), and the CPU engine
naming its device.
The GPU path itself is checked on a GPU machine by scripts/gpu_engine_check.sh."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import launch_server


def gpu_visible():
    """Whether this machine shows a GPU (then the 'no GPU' refusals cannot be checked)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    return subprocess.run([smi, "-L"], capture_output=True, timeout=30).returncode == 0


needs_no_gpu = pytest.mark.skipif(gpu_visible(), reason="a GPU is visible")
NO_CUDA = ("no CUDA device is visible", "built without CUDA")
NGRAM = json.dumps({"method": "ngram", "num_speculative_tokens": 2})
GENERATE = ("generate", "--prompt", "Hi", "--max-tokens", "2")
BENCH = ("bench", "offline", "--num-prompts", "1", "--input-len", "4", "--output-len", "2",
         "--no-single-stream")
TEXT = os.path.join(os.path.dirname(__file__), "..", "data", "quant", "perplexity_text.txt")
PERPLEXITY = ("perplexity", "--text-file", TEXT, "--ctx", "64", "--max-windows", "1")


def assert_refused(proc, *needles):
    assert proc.returncode != 0, f"expected a refusal, got exit 0:\n{proc.stdout}\n{proc.stderr}"
    assert "pagoda: error:" in proc.stderr, proc.stderr
    assert any(n in proc.stderr for n in needles), proc.stderr


@needs_no_gpu
@pytest.mark.parametrize("command", [("serve", "--port", "0"), BENCH, GENERATE, PERPLEXITY])
def test_device_cuda_without_a_gpu_is_refused(run_pagoda, default_model, command):
    proc = run_pagoda(*command, default_model, "--device", "cuda", timeout=30)
    assert_refused(proc, *NO_CUDA)
    if command[0] == "serve":
        # Refused before listening: no /health ever answered 503 for a model that cannot load.
        assert "listening on" not in proc.stderr


@needs_no_gpu
@pytest.mark.parametrize("command", [("serve", "--port", "0"), BENCH, GENERATE])
def test_device_cuda_with_speculation_is_refused(run_pagoda, default_model, command):
    proc = run_pagoda(*command, default_model, "--device", "cuda", "--speculative-config", NGRAM,
                      timeout=30)
    assert_refused(proc, *NO_CUDA, "add --device cpu")


@pytest.mark.parametrize("command", [("serve", "--port", "0"), BENCH, GENERATE, PERPLEXITY])
@pytest.mark.parametrize("flags, message", [
    (("--device", "tpu"), '--device must be cuda or cpu, got "tpu"'),
    (("--device", "cpu", "--dtype", "fp64"), '--dtype must be bf16, f16 or f32, got "fp64"'),
    (("--dtype", "int8"), '--dtype must be bf16, f16 or f32, got "int8"'),
    (("--device", "cpu", "--gpu-memory-utilization", "1.5"),
     "--gpu-memory-utilization must be in (0, 1]"),
    (("--device", "cpu", "--gpu-memory-utilization", "0"),
     "--gpu-memory-utilization must be in (0, 1]"),
])
def test_bad_device_flags_are_refused(run_pagoda, default_model, command, flags, message):
    proc = run_pagoda(*command, default_model, *flags, timeout=30)
    assert_refused(proc, message)


def test_serve_config_file_takes_the_device_keys(run_pagoda, default_model, tmp_path):
    config = tmp_path / "serve.yaml"
    config.write_text("device: cpu\ndtype: f64\n")
    assert_refused(run_pagoda("serve", default_model, "--port", "0", "--config", config,
                              timeout=30),
                   '--dtype must be bf16, f16 or f32, got "f64"')
    config.write_text("gpu_memory_utilization: 2\n")
    assert_refused(run_pagoda("serve", default_model, "--port", "0", "--config", config,
                              timeout=30),
                   "--gpu-memory-utilization must be in (0, 1]")


@needs_no_gpu
def test_serve_config_file_device_cuda_without_a_gpu(run_pagoda, default_model, tmp_path):
    config = tmp_path / "serve.yaml"
    config.write_text("device: cuda\n")
    assert_refused(run_pagoda("serve", default_model, "--port", "0", "--config", config,
                              timeout=30), *NO_CUDA)


@needs_no_gpu
def test_serve_device_from_the_environment(pagoda_bin, default_model):
    proc = subprocess.run([str(pagoda_bin), "serve", str(default_model), "--port", "0"],
                          capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PAGODA_DEVICE": "cuda"})
    assert_refused(proc, *NO_CUDA)


def test_bench_header_names_the_device(run_pagoda, default_model):
    proc = run_pagoda(*BENCH, default_model, "--device", "cpu", "--threads", "2", timeout=120)
    assert proc.returncode == 0, proc.stderr
    header = proc.stdout.splitlines()[0]
    assert " on cpu," in header and "KV blocks" in header, header


def test_serve_startup_log_names_the_device_and_kv_blocks(start_server):
    server = start_server("--device", "cpu", "--max-model-len", "512", "--max-num-seqs", "4",
                          "--threads", "2")
    log = server.log()
    ready = [line for line in log.splitlines() if "model ready" in line]
    assert ready, log
    assert " on cpu: " in ready[0] and " KV blocks of 16 tokens" in ready[0], ready[0]
    assert "sized by the default CPU budget" in ready[0], ready[0]
    blocks = int(ready[0].split(" on cpu: ")[1].split(" KV blocks")[0])
    assert server.metric("pagoda:num_kv_cache_blocks") == blocks
    assert server.stop() == 0
