"""lm-evaluation-harness (tests/requirements.txt pins it) end to end against `pagoda serve`, with
no network: its `local-completions` model, default tokenizer_backend (auto: it probes
/tokenizer_info, then tokenizes through /tokenize and /detokenize, so no Hugging Face tokenizer is
fetched), two local tasks (tests/data/lm_eval: a multiple-choice one, scored by loglikelihood
requests -- echo + logprobs over token ids, batched -- and a generate_until one).

The loglikelihood of each multiple-choice item's choice 0 is checked against transformers' on the
same ids (golden_ll, from tests/golden/forward/make_lm_eval_tasks.py over the committed golden
data): a sum of K = 8 teacher-forced token logprobs, each within docs/quantization.md's 1e-2 CPU
fidelity rule, so within K * 1e-2."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

lm_eval = pytest.importorskip("lm_eval")

DATA = ROOT / "tests" / "data" / "lm_eval"
MC = [json.loads(line) for line in (DATA / "pagoda_mc.jsonl").read_text().splitlines()]
GEN = [json.loads(line) for line in (DATA / "pagoda_gen.jsonl").read_text().splitlines()]
K = 8
PER_TOKEN = 1e-2


def run_lm_eval(server, model_name, tasks, out_dir):
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HF_HOME=str(out_dir / "hf_home"), NO_PROXY="*", no_proxy="*")
    model_args = (f"model={model_name},base_url={server.url('/v1/completions')},"
                  "num_concurrent=2,max_retries=1,tokenized_requests=True")
    cmd = [sys.executable, "-m", "lm_eval", "--model", "local-completions",
           "--model_args", model_args, "--tasks", tasks, "--include_path", str(DATA),
           "--output_path", str(out_dir / "results"), "--log_samples", "--batch_size", "4"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    samples = {}
    for path in (out_dir / "results").rglob("samples_*.jsonl"):
        task = path.name.split("_", 1)[1].rsplit("_", 1)[0]
        samples[task] = [json.loads(line) for line in path.read_text().splitlines()]
    results = next((out_dir / "results").rglob("results_*.json"))
    return json.loads(results.read_text()), samples, proc.stderr


def test_lm_eval_multiple_choice_and_generate_until(server, model_name, tmp_path):
    results, samples, log = run_lm_eval(server, model_name, "pagoda_mc,pagoda_gen", tmp_path)
    assert "remote tokenizer" in log.lower(), log[-3000:]
    assert set(samples) == {"pagoda_mc", "pagoda_gen"}, samples.keys()

    # Loglikelihoods: choice 0 of each item against transformers', where lm-eval's ids are the
    # golden ones (the server's /tokenize of context + choice gives prompt + greedy ids).
    checked = 0
    for s in samples["pagoda_mc"]:
        item = s["doc"]
        ll = s["resps"][0][0][0]
        status, tok = server.post_json("/tokenize", {"prompt": item["context"] + item["choices"][0],
                                                     "add_special_tokens": False})
        assert status == 200
        # lm-eval moves the context's trailing whitespace into the continuation before it splits
        # the ids; only items whose continuation ids are then the golden ones compare.
        _, ctx = server.post_json("/tokenize", {"prompt": item["context"].rstrip(),
                                                "add_special_tokens": False})
        if tok["tokens"][len(ctx["tokens"]):] != item["continuation_ids"]:
            continue
        assert abs(float(ll) - item["golden_ll"]) <= K * PER_TOKEN, (item["name"], ll)
        checked += 1
    assert checked >= 4, f"only {checked} items tokenize to the golden ids"
    # The greedy continuation is the more likely choice every time.
    assert results["results"]["pagoda_mc"]["acc,none"] == 1.0

    # generate_until: greedy, 8 tokens, cases with no near tie in them: transformers' text.
    gens = {s["doc"]["name"]: s["resps"][0][0] for s in samples["pagoda_gen"]}
    assert gens == {g["name"]: g["answer"] for g in GEN}
    assert results["results"]["pagoda_gen"]["exact_match,none"] == 1.0
