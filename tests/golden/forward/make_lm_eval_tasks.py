"""Writes the two small local lm-evaluation-harness tasks of tests/e2e/test_lm_eval.py from the
committed transformers golden data (tests/data/forward/smollm2_greedy.json, made by
make_smollm2_golden.py), so their expected loglikelihoods are transformers' own:

  pagoda_mc.jsonl   multiple choice: context = a golden prompt's text, choice 0 = the text of its
                    first K greedy tokens (golden_ll: the sum of transformers' logprobs of those
                    tokens, teacher-forced), choice 1 = another case's greedy text.
  pagoda_gen.jsonl  generate_until: question = a golden prompt's text, answer = the text of its
                    first G greedy tokens, for cases with no near tie in those steps.

Needs only the standard library: the token texts come from SmolLM2's tokenizer.json (byte-level
BPE: each vocabulary string maps back to bytes through GPT-2's byte-to-unicode table).
Run from the repository root: python3 tests/golden/forward/make_lm_eval_tasks.py"""
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "data" / "forward" / "smollm2_greedy.json"
TOKENIZER = ROOT / "tests" / "data" / "tokenizer" / "smollm2" / "tokenizer.json"
OUT = ROOT / "tests" / "data" / "lm_eval"
K = 8   # greedy tokens in a multiple-choice continuation
G = 8   # greedy tokens in a generate_until answer
MC_CASES = ["short_capital", "short_once", "medium_science", "medium_story", "medium_list",
            "code_python"]
MIN_GAP = 0.05  # top1 - top2 logit gap that rules out a near tie


def byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def main():
    golden = json.loads(GOLDEN.read_text())
    vocab = json.loads(TOKENIZER.read_text())["model"]["vocab"]
    id_to_token = {i: t for t, i in vocab.items()}
    to_byte = byte_decoder()

    def decode(ids):
        return bytes(to_byte[ch] for i in ids for ch in id_to_token[i]).decode("utf-8")

    cases = {c["name"]: c for c in golden["cases"]}
    mc = []
    for i, name in enumerate(MC_CASES):
        c = cases[name]
        steps = {t["step"]: t for t in c["topk"]}
        assert all(steps[k]["ids"][0] == c["greedy_ids"][k] for k in range(K)), name
        other = cases[MC_CASES[(i + 1) % len(MC_CASES)]]
        mc.append({"name": name, "context": c["text"],
                   "choices": [decode(c["greedy_ids"][:K]), decode(other["greedy_ids"][:K])],
                   "label": 0,
                   "continuation_ids": c["greedy_ids"][:K],
                   "golden_ll": sum(steps[k]["logprobs"][0] for k in range(K))})
    gen = []
    for c in golden["cases"]:
        if c["kind"] != "text" or min(c["top1_top2_gap"][:G]) <= MIN_GAP:
            continue
        try:
            answer = decode(c["greedy_ids"][:G])
        except UnicodeDecodeError:  # ends inside a character
            continue
        if "\n" in answer or len(c["prompt_ids"]) > 100:
            continue
        gen.append({"name": c["name"], "question": c["text"], "answer": answer})
    OUT.mkdir(parents=True, exist_ok=True)
    for path, rows in [(OUT / "pagoda_mc.jsonl", mc), (OUT / "pagoda_gen.jsonl", gen[:4])]:
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        print(path, len(rows))


if __name__ == "__main__":
    main()
