"""Seconds-long smoke runs of every benchmark, so they keep building and running: each Google
Benchmark binary on a small filter with a tiny --benchmark_min_time, and the serving benchmark
client (bench/serve/serve_bench.py) against a real `pagoda serve`. Never gates on speed."""
import json
import subprocess
import sys

import pytest

from conftest import ROOT

SERVE_BENCH = ROOT / "bench" / "serve" / "serve_bench.py"
REPORT_SERVING = ROOT / "bench" / "peer" / "report_serving.py"

# binary (relative to the build folder) -> (filter, benchmark name prefixes that must have run)
MICRO_BENCHMARKS = {
    "bench/cpu/pagoda_bench_cpu_ops": (
        # One matmul (Q4_1, the default model's type): each shape builds 256 MiB of cold weights.
        "BM_(MatmulDecode/5/0/|AttentionDecode/1/512/0|AttentionPrefill/512/0|RmsNorm/1/576|Rope)",
        ["BM_MatmulDecode", "BM_AttentionDecode", "BM_AttentionPrefill", "BM_RmsNorm",
         "BM_Rope"]),
    "bench/engine/pagoda_bench_scheduler": (
        ".", ["BM_SchedulerDecodeStep256", "BM_AdmitPrompt2048", "BM_HashBlock16"]),
    "bench/engine/pagoda_bench_block_pool": (
        ".", ["BM_BlockPoolAllocateFree", "BM_BlockPoolAllocateEvictCache",
              "BM_BlockPoolLookupTouch128", "BM_HashPrompt"]),
    "bench/tokenizer/pagoda_bench_tokenizer": (
        ".", ["BM_TokenizerEncode", "BM_TokenizerDecode", "BM_TokenizerDecodeStream"]),
    "bench/api/pagoda_bench_api": (".", ["BM_EncodeResponse"]),
    # The small sizes only: the quadratic parser it compares with takes seconds at 49,152 keys.
    "bench/api/pagoda_bench_request_body": (
        "BM_(ParseRequestBody|OrderedJsonParse|MapJsonParse)/1000$",
        ["BM_ParseRequestBody", "BM_OrderedJsonParse", "BM_MapJsonParse"]),
}


@pytest.fixture(scope="module")
def build_dir(pagoda_bin):
    cache = (pagoda_bin.parent / "CMakeCache.txt")
    if cache.exists() and "PAGODA_BUILD_BENCH:BOOL=OFF" in cache.read_text(errors="replace"):
        pytest.skip("configured with PAGODA_BUILD_BENCH=OFF")
    return pagoda_bin.parent


@pytest.mark.parametrize("binary", sorted(MICRO_BENCHMARKS))
def test_micro_benchmark_runs(build_dir, default_model, binary):
    path = build_dir / binary
    assert path.exists(), f"{path} was not built (scripts/build.sh builds bench/ by default)"
    pattern, families = MICRO_BENCHMARKS[binary]
    proc = subprocess.run([str(path), f"--benchmark_filter={pattern}",
                           "--benchmark_min_time=0.001", "--benchmark_format=json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = json.loads(proc.stdout)["benchmarks"]
    errors = [(b["name"], b.get("error_message")) for b in runs if b.get("error_occurred")]
    assert not errors, errors
    for family in families:
        assert any(b["name"].startswith(family) for b in runs), (family, [b["name"] for b in runs])
    assert all(b["iterations"] >= 1 for b in runs)


def test_tokenizer_benchmark_reports_throughput(build_dir, default_model):
    proc = subprocess.run([str(build_dir / "bench/tokenizer/pagoda_bench_tokenizer"),
                           "--benchmark_filter=BM_TokenizerEncode/512$",
                           "--benchmark_min_time=0.001", "--benchmark_format=json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run,) = json.loads(proc.stdout)["benchmarks"]
    # ~4 bytes per token for English prose: a tokenizer that loaded but encodes nothing fails.
    assert 50 <= run["tokens"] <= 400, run
    assert run["bytes_per_second"] > 0


@pytest.fixture(scope="module")
def bench_server(start_server):
    return start_server("--max-model-len", "256", "--max-num-seqs", "4", "--threads", "1",
                        "--disable-log-requests")


def serve_bench(server, tmp_path, *args, timeout=120):
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, str(SERVE_BENCH), "--base-url", server.base_url,
                           "--result-json", str(out), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)
    report = json.loads(out.read_text()) if out.exists() else None
    return proc, report


def test_serve_bench_fixed_concurrency(bench_server, tmp_path):
    proc, report = serve_bench(bench_server, tmp_path, "--num-prompts", 6, "--concurrency", 3,
                               "--input-len", 16, "--output-len", 8, "--ignore-eos",
                               "--warmup", 1)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report["completed"] == 6 and report["failed"] == 0, report
    # ignore_eos fixes the output length; random prompts are exactly --input-len tokens.
    assert report["total_output_tokens"] == 6 * 8
    assert report["total_input_tokens"] == 6 * 16
    # On the CPU the device counters exist but stay 0: no GPU section.
    assert report["device"] is None
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"):
        stats = report[key]
        assert 0 < stats["mean"] and stats["median"] <= stats["p99"], (key, stats)
    assert report["ttft_ms"]["p99"] < report["e2el_ms"]["p99"]
    assert report["output_throughput"] > 0 and report["request_throughput"] > 0
    assert "Serving Benchmark Result" in proc.stdout and "P99 ITL (ms)" in proc.stdout
    assert "serve_bench: 6/6 done" in proc.stderr  # progress lines


def test_serve_bench_poisson_rate_and_chat_dataset(bench_server, tmp_path):
    dataset = tmp_path / "prompts.jsonl"
    dataset.write_text("\n".join(json.dumps({"prompt": p, "output_len": 4})
                                 for p in ("Say hi.", "Name a colour.", "Count to three.")))
    proc, report = serve_bench(bench_server, tmp_path, "--backend", "openai-chat",
                               "--dataset", dataset, "--num-prompts", 4, "--concurrency", 4,
                               "--request-rate", 20, "--ignore-eos", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["completed"] == 4
    assert report["total_output_tokens"] == 4 * 4 and report["request_rate"] == 20


def test_serve_bench_counts_failures(bench_server, tmp_path):
    # 300 + 8 tokens exceed --max-model-len 256: every request is refused with HTTP 400.
    proc, report = serve_bench(bench_server, tmp_path, "--num-prompts", 2, "--concurrency", 2,
                               "--input-len", 300, "--output-len", 8)
    assert proc.returncode == 1
    assert report["failed"] == 2 and report["completed"] == 0
    assert any("HTTP 400" in e for e in report["errors"]), report["errors"]


def test_report_serving_ratios(tmp_path):
    def result(engine, rnd, tput, ttft99):
        stats = {"mean": 1.0, "median": 1.0, "p90": 1.0, "p99": 1.0}
        rep = {"output_throughput": tput, "ttft_ms": {**stats, "p99": ttft99}, "itl_ms": stats,
               "tpot_ms": stats, "failed": 0, "errors": []}
        (tmp_path / f"result-{engine}-16-{rnd}.json").write_text(json.dumps(rep))

    for rnd, (l, p) in enumerate([(100, 150), (120, 240), (80, 160)], 1):
        result("llama.cpp", rnd, l, 1000)
        result("pagoda", rnd, p, 500)
    proc = subprocess.run([sys.executable, str(REPORT_SERVING)], capture_output=True, text=True,
                          env={"RESULTS_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    # Medians 100 vs 160: 1.60; per-round ratios in round order.
    assert "| 16 | output tok/s | 100.0 (80.0–120.0) | 160.0 (150.0–240.0) | **1.60** | " \
           "1.50, 2.00, 2.00 |" in proc.stdout, proc.stdout
    assert "| 16 | p99 TTFT ms | 1000.0 (1000.0–1000.0) | 500.0 (500.0–500.0) | 0.50 |" \
        in proc.stdout


def test_bench_offline_rounds_alternate_and_pool(run_pagoda, default_model):
    # --rounds 2: concurrent 1/2, single 1/2, concurrent 2/2, single 2/2 in that order, then each
    # side pooled (the concurrent pool holds 2 x 3 requests) and one ratio of the pools.
    proc = run_pagoda("bench", "offline", default_model, "--device", "cpu", "--threads", "2",
                      "--num-prompts", "3", "--input-len", "8", "--output-len", "4",
                      "--rounds", "2", timeout=180)
    assert proc.returncode == 0, proc.stderr
    labels = [line.split(" req in ")[0].rsplit(" ", 1)[0].strip()
              for line in proc.stdout.splitlines() if " req in " in line]
    assert labels == ["concurrent 1/2", "single 1/2", "concurrent 2/2", "single 2/2",
                      "concurrent", "single-stream"], proc.stdout
    pooled = next(line for line in proc.stdout.splitlines() if line.startswith("concurrent  "))
    assert pooled.split()[1] == "6", pooled
    assert "vs single stream, 2 rounds pooled: " in proc.stdout
    assert "steady decode ratio per round: min " in proc.stdout


def test_bench_offline_refuses_zero_rounds(run_pagoda, default_model):
    proc = run_pagoda("bench", "offline", default_model, "--device", "cpu", "--rounds", "0")
    assert proc.returncode != 0
    assert "--rounds must be >= 1" in proc.stderr
