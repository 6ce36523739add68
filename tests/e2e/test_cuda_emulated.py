"""`pagoda serve --device cuda` end to end where no GPU is: build/emulated/pagoda is the same command
line linked against the CPU emulation of the CUDA side (kernels, runtime, cuBLASLt; docs/gpu.md,
"The CUDA side on the CPU"), so these tests drive the CUDA executor through the HTTP server: its
decode graphs, overlapped steps, device sampler and speculation, its start-up (KV sizing from
device memory, graph capture) and shutdown. The model is a tiny Llama config with dummy weights and
an ASCII byte tokenizer written here (head_dim 64, so decode takes the tensor-core attention
kernel).

Also the GPU session's serving step itself (scripts/gpu_serve_bench.sh), run on the emulated binary
with a small workload, so a broken script is found here rather than in a lent GPU's minutes."""
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import (ROOT, async_client_for, free_port, launch_server, stream_then_vanish,
                      wait_for_metrics)

# Small enough that a decode step takes tens of milliseconds on the emulation (every warp shuffle of
# every row of every GEMV switches 32 fibers), with head_dim 64 for the tensor-core decode kernel.
CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128,
    "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 2,
    "num_key_value_heads": 1, "head_dim": 64, "vocab_size": 128,
    "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
}
# The emulated device: small, since the emulation's device memory is this machine's.
EMULATED_ENV = {**os.environ, "PAGODA_EMULATED_DEVICE_MIB": "1024"}
PROMPTS = ["The sea was calm", "List three colours:", "one two three one two three one two",
           "def fibonacci(n):"]
M = "tiny"


@pytest.fixture(scope="module")
def emulated_bin(pagoda_bin):
    path = Path(pagoda_bin).parent / "emulated" / "pagoda"
    if not path.exists():
        # Builds without the CUDA headers, and the sanitizer builds, have no emulation; a build
        # that configured it must have built it.
        ninja = Path(pagoda_bin).parent / "build.ninja"
        if ninja.exists() and "emulated/pagoda" in ninja.read_text(errors="replace"):
            pytest.fail(f"{path} is missing: build the pagoda_emulated target")
        pytest.skip("this build has no CUDA emulation (no CUDA headers, or a sanitizer build)")
    return path


def ascii_tokenizer():
    """tokenizer.json of a byte-level BPE without merges over the 128 ASCII bytes: token id = byte,
    so the vocabulary is the model's 128 and every token decodes to its own character (the default
    model's 49,152 would make the LM head and sampler most of each emulated step)."""
    # GPT-2's byte-to-unicode table, by which ByteLevel spells bytes as printable characters.
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    spelled = {b: b for b in printable}
    for b in range(256):
        if b not in spelled:
            spelled[b] = 256 + len(spelled) - len(printable)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    return {"version": "1.0", "added_tokens": [], "normalizer": None,
            "pre_tokenizer": byte_level, "post_processor": None, "decoder": byte_level,
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": None, "end_of_word_suffix": None,
                      "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": {chr(spelled[b]): b for b in range(128)}, "merges": []}}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """The config (tiny-llama-hd64.json) and, beside it, its tokenizer."""
    path = tmp_path_factory.mktemp("emulated")
    (path / "tokenizer.json").write_text(json.dumps(ascii_tokenizer()))
    (path / "tiny-llama-hd64.json").write_text(json.dumps(CONFIG))
    return path


@pytest.fixture(scope="module")
def config_path(model_dir):
    return model_dir / "tiny-llama-hd64.json"


def start(emulated_bin, config_path, *flags, device="cuda"):
    return launch_server(emulated_bin, config_path, "--load-format", "dummy", "--tokenizer",
                         config_path.parent, "--device", device, "--max-model-len", "256",
                         "--max-num-seqs", "8", "--served-model-name", M,
                         "--step-time-target-ms", "0", "--disable-log-requests", *flags,
                         timeout=180, env=EMULATED_ENV)


@pytest.fixture(scope="module")
def servers(emulated_bin, config_path):
    """f32 everywhere, so the CPU and the CUDA executor differ only in their sums' order: the CPU,
    the CUDA executor eager, and with its graphs and overlapped steps (what serving runs)."""
    started = {}
    try:
        started["cpu"] = start(emulated_bin, config_path, "--dtype", "f32", device="cpu")
        started["eager"] = start(emulated_bin, config_path, "--dtype", "f32", "--enforce-eager")
        started["graphs"] = start(emulated_bin, config_path, "--dtype", "f32",
                                  "--async-scheduling")
        yield started
    finally:
        for server in started.values():
            if server.proc.poll() is None:
                server.stop(signal.SIGKILL)


def complete(server, prompt, max_tokens=16):
    """A greedy completion with each token's logprob and the top 5 (token = character here)."""
    body = {"model": M, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True, "logprobs": 5}
    status, response = server.post_json("/v1/completions", body, timeout=120)
    assert status == 200, response
    choice = response["choices"][0]
    lp = choice["logprobs"]
    assert response["usage"]["completion_tokens"] == max_tokens
    return {"text": choice["text"], "tokens": lp["tokens"], "logprobs": lp["token_logprobs"],
            "top": lp["top_logprobs"]}


def greedy_text(server, prompt, max_tokens):
    body = {"model": M, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True}
    status, response = server.post_json("/v1/completions", body, timeout=120)
    assert status == 200, response
    return response["choices"][0]["text"]


def assert_logprobs_close(want, got, what):
    """vLLM's check_logprobs_close: the greedy tokens agree until the first place they differ,
    and there each side's token is among the other's top 5 (a near tie the two orders of summation
    broke differently); after it the continuations are no longer comparable."""
    assert len(want["tokens"]) == len(got["tokens"]) == 16, what
    for i, (w, g) in enumerate(zip(want["tokens"], got["tokens"])):
        if w != g:
            assert w in got["top"][i] and g in want["top"][i], f"{what}: position {i}"
            return
        # The CPU holds the dummy weights rounded to bf16 (random_fill_draw.h), the f32 CUDA
        # executor unrounded: bf16's 2^-8 of a logprob near -4 is 0.016 (seen: at most 0.0023).
        assert abs(want["logprobs"][i] - got["logprobs"][i]) < 0.02, f"{what}: position {i}"


def test_cuda_executor_answers_as_the_cpu_does(servers):
    for prompt in PROMPTS:
        want = complete(servers["cpu"], prompt)
        assert_logprobs_close(want, complete(servers["eager"], prompt), f"eager: {prompt!r}")
        assert_logprobs_close(want, complete(servers["graphs"], prompt), f"graphs: {prompt!r}")


def test_graphs_and_overlapped_steps_change_no_bit(servers):
    # One request at a time, so each decode step is one row: the graph of batch size 1 replays
    # the eager step's kernels on the same shapes, and overlapping the steps changes only when
    # the host prepares them. Logprobs included, bit for bit.
    assert "cuda graphs: 4 sizes up to 8" in servers["graphs"].log(), servers["graphs"].log()
    assert "cuda graphs: off" in servers["eager"].log(), servers["eager"].log()
    for prompt in PROMPTS:
        assert complete(servers["graphs"], prompt) == complete(servers["eager"], prompt), prompt


def test_ngram_speculation_keeps_greedy_output(emulated_bin, config_path, servers):
    spec = start(emulated_bin, config_path, "--dtype", "f32", "--async-scheduling",
                 "--speculative-config",
                 json.dumps({"method": "ngram", "num_speculative_tokens": 3,
                             "prompt_lookup_min": 1, "prompt_lookup_max": 3}))
    try:
        # No logprobs asked (a request that asks for them is not speculated). The verification
        # step's rows are not a decode step's, so the tokens must agree, not their last bits.
        for prompt in PROMPTS:
            assert greedy_text(spec, prompt, 24) == greedy_text(servers["graphs"], prompt, 24)
        assert spec.metric("pagoda:spec_decode_num_drafts_total") > 0
        assert spec.metric("pagoda:spec_decode_num_accepted_tokens_total") > 0
    finally:
        assert spec.stop() == 0


def test_vanishing_clients_free_their_blocks_and_sigterm_finishes_the_rest(emulated_bin,
                                                                          config_path):
    # bf16, graphs and overlapped steps: what `pagoda serve` runs on a GPU.
    server = start(emulated_bin, config_path, "--async-scheduling")
    try:
        body = {"model": M, "prompt": "Tell me a long story.", "max_tokens": 200,
                "ignore_eos": True, "stream": True}
        # A finished request's blocks stay in the prefix cache but count as free: this is the
        # usage that 12 clients vanishing mid-stream must come back to.
        greedy_text(server, body["prompt"], 2)
        idle = server.metric("pagoda:kv_cache_usage_perc")

        async def vanish():
            await asyncio.gather(*(stream_then_vanish(server.port, body, 120) for _ in range(12)))

        asyncio.run(asyncio.wait_for(vanish(), 300))
        # Every aborted request leaves the engine, and its blocks go back once the step in flight
        # that still wrote them is collected.
        wait_for_metrics(server, {"pagoda:num_requests_running": 0.0,
                                  "pagoda:num_requests_waiting": 0.0,
                                  "pagoda:kv_cache_usage_perc": idle}, timeout=120)

        # 10 requests accepted, then SIGTERM: every one finishes whole, and the server exits 0.
        results = {}

        async def one(client, key):
            completion = await client.completions.create(
                model=M, prompt=f"Poem {key}:", max_tokens=12, temperature=0,
                extra_body={"ignore_eos": True})
            results[key] = (completion.choices[0].finish_reason,
                            completion.usage.completion_tokens)

        async def run():
            async with async_client_for(server) as client:
                tasks = [asyncio.create_task(one(client, i)) for i in range(10)]
                deadline = time.monotonic() + 60
                while server.metric("pagoda:num_requests_running") + \
                        server.metric("pagoda:num_requests_waiting") + len(results) < 10:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.01)
                server.proc.send_signal(signal.SIGTERM)
                await asyncio.gather(*tasks)

        asyncio.run(run())
        assert server.proc.wait(timeout=120) == 0, server.log()
        assert sorted(results.values()) == [("length", 12)] * 10
    finally:
        if server.proc.poll() is None:
            server.stop(signal.SIGKILL)


def test_gpu_serve_bench_script_runs_on_the_emulation(emulated_bin, config_path, tmp_path):
    # scripts/gpu_serve_bench.sh as scripts/gpu_session.sh calls it (async scheduling only), with
    # bf16 and then FP8 weights + FP8 KV cache, on a workload small enough for the emulation.
    env = {**EMULATED_ENV, "PATH": f"{emulated_bin.parent}:{os.environ['PATH']}",
           "CONFIG": str(config_path), "NUM_PROMPTS": "6", "CONCURRENCY": "3",
           "INPUT_LEN": "24", "OUTPUT_LEN": "6", "MAX_MODEL_LEN": "128", "SKIP_SPEC": "1",
           "SKIP_SYNC": "1", "READY_TIMEOUT": "180", "PORT": str(free_port()),
           "TOKEN_ID_RANGE": "32 127"}
    for name, extra in (("bf16", {}), ("fp8", {"FP8": "1"})):
        out = tmp_path / name
        out.mkdir()
        proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_serve_bench.sh"),
                               str(config_path.parent)], env={**env, **extra, "OUT": str(out)},
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        summary = (out / "serve_bench_summary.txt").read_text()
        precision = "fp8-w-fp8-kv." if extra else ""
        lines = [l for l in summary.splitlines() if l.startswith(f"{precision}async: ")]
        assert any(" ready in " in l for l in lines), summary
        result = [l for l in lines if " ok, output " in l]
        assert len(result) == 1 and result[0].startswith(f"{precision}async: 6/6 ok"), summary
        steps = int(result[0].rsplit("busy per step, ", 1)[1].split()[0])
        assert steps > 0 and "GPU idle nan" not in result[0], summary
        assert (out / "serve_bench.tgz").stat().st_size > 0



def test_structured_outputs_reach_the_device_sampler(emulated_bin, model_dir, tmp_path):
    # scripts/gpu_structured_check.py: choice, regex and JSON schema, alone and 16 at once, on
    # random weights, whose unconstrained output is noise: every answer that parses shows the
    # token mask was applied by the CUDA executor's sampler. Then SIGTERM must exit 0.
    env = {**EMULATED_ENV, "PATH": f"{emulated_bin.parent}:{os.environ['PATH']}",
           "PORT": str(free_port()), "OUT": str(tmp_path)}
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_structured_check.py"),
                           str(model_dir / "tiny-llama-hd64.json"), str(model_dir)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    verdicts = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    assert verdicts.count("PASS") == 8 and "FAIL" not in verdicts, proc.stdout


@pytest.mark.parametrize("flags, env", [
    ([], {}),
    (["--quantization", "fp8", "--kv-cache-dtype", "fp8"], {}),
    (["--quantization", "fp8"], {"PAGODA_FP8_SKINNY": "pipelined"}),
    (["--quantization", "int4"], {}),
], ids=["bf16", "fp8-w-fp8-kv", "fp8-w-pipelined-skinny", "int4-w"])
def test_gpu_bench_model_runs_on_the_emulation(emulated_bin, config_path, flags, env):
    # `gpu_bench model` as scripts/gpu_session.sh's model steps run it (the same weight and cache
    # forms and switches), on the tiny config: every executor variant it times (eager, PDL,
    # graphs, each decode-attention kernel, the mixed step split and unsplit) must run through.
    proc = subprocess.run([str(emulated_bin.parent / "gpu_bench"), "model", "--config",
                           str(config_path), "--batch", "2", "--context", "16", "--steps", "2",
                           *flags], env={**EMULATED_ENV, **env}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    labels = "\n".join(results)
    for want in ("startup: 3 decode graphs up to b3", "(execute, CUDA graphs + PDL)",
                 "tensor-core attn", "tensor-core direct attn", "mixed step b2: unsplit / split",
                 "d2h bytes per decode step, execute() b2"):
        assert want in labels, labels
    # The mixed steps took the executor's split attention path every time.
    assert "split attention path" not in proc.stderr, proc.stderr
