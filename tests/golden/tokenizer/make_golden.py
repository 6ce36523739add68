#!/usr/bin/env python3
"""Golden token ids and decoded strings for the tokenizer tests, from the reference tools.

Run with the dev venv (scripts/setup_dev_venv.sh creates .venv-dev) after scripts/setup.sh has put
the GGUF files under models/ and make_corpus.py has written the corpus:
    python3 tests/golden/tokenizer/make_golden.py [NAME...]   (default: every tokenizer below)

Steps, per tokenizer:
  1. transformers' AutoTokenizer.from_pretrained(models_dir, gguf_file=...) converts the GGUF
     vocabulary; save_pretrained exports tokenizer.json + tokenizer_config.json. The SmolLM2 and
     llama-spm exports are committed (re-serialized compactly, same content) under
     tests/data/tokenizer/<name>/; llama-bpe and qwen2 are too large and stay in a temp folder.
  2. The `tokenizers` library loads the exported tokenizer.json and encodes every corpus sample
     (with special-token parsing, and with encode_special_tokens=True), decodes the ids (with and
     without skip_special_tokens), and decodes random id sequences.
  3. "llama_bpe": the export, corrected in two places to what the GGUF (llama.cpp's "llama-bpe",
     i.e. Llama 3) says: model.ignore_merges = true as in Llama 3's own tokenizer.json, and the
     "<|endoftext|>" token that the conversion appends (id 128256, past the file's vocabulary and
     the model's embedding) removed.
  4. "smollm2_digits": the SmolLM2 export with the pre-tokenizer that SmolLM2's own tokenizer.json
     uses and that GGUF's `tokenizer.ggml.pre = "smollm"` names (Digits(individual_digits) then
     ByteLevel). transformers' GGUF conversion drops the digit split; the GGUF path follows the file.
  5. "gemma3": Gemma 3 270M's GGUF (262,144 SentencePiece pieces, no merges in the file) as
     transformers' GGUF conversion builds it: GemmaTokenizer (Replace " " -> "\u2581", one word per
     run between added tokens, BPE with byte fallback), merges recovered from the vocabulary in
     file order, control tokens special, user-defined ones (newline runs, tabs, HTML tags) added.
     compare_gemma3_sentencepiece.py checks this conversion against the sentencepiece library on
     the same pieces: they differ only on runs of more than 31 spaces (8 of 2,290 samples).
Output: tests/data/tokenizer/expected/<name>.jsonl; line 1 holds the tool versions.
"""
import json
import os
import platform
import random
import sys
import tempfile

import tokenizers
import transformers
from tokenizers import Tokenizer, pre_tokenizers
from transformers import AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
DATA = os.path.join(ROOT, "tests", "data", "tokenizer")
MODELS = os.path.join(ROOT, "models")
NUM_RANDOM = 300
NUM_WITH_SPECIAL = 100

SOURCES = {
    "smollm2": (MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf", True),
    "llama_spm": (os.path.join(MODELS, "vocab"), "ggml-vocab-llama-spm.gguf", True),
    "llama_bpe": (os.path.join(MODELS, "vocab"), "ggml-vocab-llama-bpe.gguf", False),
    "qwen2": (os.path.join(MODELS, "vocab"), "ggml-vocab-qwen2.gguf", False),
    "gemma3": (os.path.join(MODELS, "gemma-3-270m"), "gemma-3-270m-q4_k_m.gguf", False),
}


def read_corpus():
    with open(os.path.join(DATA, "corpus.txt"), encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")[:-1]
    with open(os.path.join(DATA, "corpus_multiline.jsonl"), encoding="utf-8") as f:
        multi = [json.loads(l) for l in f.read().split("\n") if l]
    return lines + multi


def export(name, tmp):
    folder, gguf_file, commit = SOURCES[name]
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
    out = os.path.join(tmp, name)
    tok.save_pretrained(out)
    if commit:
        dest = os.path.join(DATA, name)
        os.makedirs(dest, exist_ok=True)
        for fname in ("tokenizer.json", "tokenizer_config.json"):
            with open(os.path.join(out, fname), encoding="utf-8") as f:
                content = json.load(f)
            with open(os.path.join(dest, fname), "w", encoding="utf-8") as f:
                json.dump(content, f, ensure_ascii=False, separators=(",", ":"))
    return os.path.join(out, "tokenizer.json")


def random_sequences(tok, rng):
    vocab_size = tok.get_vocab_size()
    vocab = tok.get_vocab()
    specials = [t.content for t in tok.get_added_tokens_decoder().values()]
    special_ids = [vocab[s] for s in specials]
    byte_ids = [i for t, i in vocab.items() if t.startswith("<0x") and len(t) == 6]
    if not byte_ids:  # byte-level: single-character tokens that stand for bytes >= 0x80
        byte_ids = [i for t, i in vocab.items() if len(t) == 1 and ord(t) >= 0xA1]
    out = []
    for _ in range(NUM_RANDOM):
        ids = []
        for _ in range(rng.randint(1, 16)):
            kind = rng.random()
            pool = special_ids if kind < 0.1 else byte_ids if kind < 0.5 else None
            ids.append(rng.choice(pool) if pool else rng.randrange(vocab_size))
        out.append(ids)
    return out


def llama3_corrected(tok_json, gguf_vocab_size):
    with open(tok_json, encoding="utf-8") as f:
        content = json.load(f)
    content["model"]["ignore_merges"] = True
    content["added_tokens"] = [t for t in content["added_tokens"] if t["id"] < gguf_vocab_size]
    return Tokenizer.from_str(json.dumps(content))


def golden(name, tok_json, samples, versions, pre_tokenizer=None, tok=None):
    tok = tok or Tokenizer.from_file(tok_json)
    if pre_tokenizer is not None:
        tok.pre_tokenizer = pre_tokenizer
    path = os.path.join(DATA, "expected", name + ".jsonl")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps({"meta": versions, "tokenizer": name}) + "\n")
        for index, text in enumerate(samples):
            tok.encode_special_tokens = False
            ids = tok.encode(text, add_special_tokens=False).ids
            rec = {"i": index, "ids": ids}
            tok.encode_special_tokens = True
            plain = tok.encode(text, add_special_tokens=False).ids
            if plain != ids:
                rec["ids_plain"] = plain
            if index < NUM_WITH_SPECIAL:
                tok.encode_special_tokens = False
                rec["ids_added"] = tok.encode(text, add_special_tokens=True).ids
            rec["decoded"] = tok.decode(ids, skip_special_tokens=False)
            skipped = tok.decode(ids, skip_special_tokens=True)
            if skipped != rec["decoded"]:
                rec["decoded_skip"] = skipped
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        rng = random.Random(name)
        for ids in random_sequences(tok, rng):
            rec = {"random": ids, "decoded": tok.decode(ids, skip_special_tokens=False),
                   "decoded_skip": tok.decode(ids, skip_special_tokens=True)}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print(name, "->", path)


def main():
    import gguf
    versions = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                "gguf": getattr(gguf, "__version__", "unknown"), "python": platform.python_version()}
    try:
        from importlib.metadata import version
        versions["gguf"] = version("gguf")
    except Exception:
        pass
    samples = read_corpus()
    names = sys.argv[1:] or list(SOURCES)
    unknown = sorted(set(names) - set(SOURCES))
    if unknown:
        sys.exit(f"unknown tokenizer(s) {unknown}; known: {sorted(SOURCES)}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            tok_json = export(name, tmp)
            if name == "llama_bpe":
                folder, gguf_file, _ = SOURCES[name]
                reader = gguf.GGUFReader(os.path.join(folder, gguf_file))
                num_tokens = len(reader.fields["tokenizer.ggml.tokens"].data)
                golden(name, tok_json, samples, versions, tok=llama3_corrected(tok_json, num_tokens))
            else:
                golden(name, tok_json, samples, versions)
            if name == "smollm2":
                digits = pre_tokenizers.Sequence([
                    pre_tokenizers.Digits(individual_digits=True),
                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
                golden("smollm2_digits", tok_json, samples, versions, digits)


if __name__ == "__main__":
    sys.exit(main())
