#!/usr/bin/env python3
"""Greedy continuations of quantized models against the BF16 baseline (docs/perf/quantization.md).

    .venv/bin/python tests/golden/quant/compare_greedy.py PAGODA_BIN BASELINE NAME=MODEL[:QUANT] ...

Each of 20 prompts (corpus.txt lines 1-11, 15-23: the prose and code samples written for Pagoda's
tokenizer tests) is continued for 64 tokens at temperature 0 (EOS ignored) by `pagoda generate`
with each model (QUANT: a --quantization value). Prints, per model, how many continuations are
text-identical to the baseline's and the mean length of the common prefix in characters.
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LINES = list(range(1, 12)) + list(range(15, 24))
MAX_TOKENS = 64


def prompts():
    lines = (ROOT / "tests" / "data" / "tokenizer" / "corpus.txt").read_text().split("\n")
    return [lines[i - 1] for i in LINES]


def generate(binary, model, quant, prompt):
    cmd = [binary, "generate", model, "--prompt", prompt, "--max-tokens", str(MAX_TOKENS),
           "--temperature", "0", "--ignore-eos", "--device", "cpu"]
    if quant:
        cmd += ["--quantization", quant]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def common_prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def main():
    binary, baseline, *others = sys.argv[1:]
    ps = prompts()
    base = [generate(binary, baseline, None, p) for p in ps]
    print(f"baseline {baseline}: {len(ps)} prompts x {MAX_TOKENS} tokens")
    for spec in others:
        name, model = spec.split("=", 1)
        model, _, quant = model.partition(":")
        outs = [generate(binary, model, quant or None, p) for p in ps]
        same = sum(o == b for o, b in zip(outs, base))
        prefix = sum(common_prefix(o, b) for o, b in zip(outs, base)) / len(ps)
        mean_len = sum(len(b) for b in base) / len(ps)
        print(f"{name}: {same}/{len(ps)} identical, mean common prefix {prefix:.0f} of "
              f"{mean_len:.0f} chars", flush=True)


if __name__ == "__main__":
    main()
