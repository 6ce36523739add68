#!/usr/bin/env python3
"""Golden data for the tokenizer.json normalizers (NFC, NFD, NFKC, NFKD, Lowercase, Strip,
StripAccents, Replace, Sequence), from Hugging Face `tokenizers`.

Run with the dev venv (scripts/setup_dev_venv.sh creates .venv-dev):
    python3 tests/golden/tokenizer/make_normalizer_golden.py

Steps:
  1. Train one small byte-level BPE (1000 ids) on the committed corpus (corpus.txt and
     corpus_multiline.jsonl); training is deterministic for a fixed input.
  2. For each configuration in CONFIGS, give that vocabulary a normalizer and write
     tests/data/tokenizer/normalizers/<name>/tokenizer.json. "qwen2" copies the pipeline of
     Qwen2.5's own tokenizer.json (NFC, its Split regex, ByteLevel, ChatML specials); transformers'
     GGUF export of models/vocab/ggml-vocab-qwen2.gguf has no normalizer and is 11 MB, so it is
     neither the source nor committed.
  3. Record in tests/data/tokenizer/normalizers/expected/<name>.jsonl, for every corpus sample and
     for EXTRA_SAMPLES (edge cases of the Unicode algorithms), normalizer.normalize_str(text) when it
     differs from the text, and the ids of encode(text, add_special_tokens=False) for the samples
     with non-ASCII text that the normalizer changes, every IDS_EVERY-th sample, the multi-line
     ones and the extras (ids for every sample would not fit the size budget); for "qwen2", of
     every non-ASCII sample.
Line 1 of each expected file holds the tool versions.
"""
import json
import os
import platform
import sys

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
DATA = os.path.join(ROOT, "tests", "data", "tokenizer")
OUT = os.path.join(DATA, "normalizers")
VOCAB_SIZE = 1000
IDS_EVERY = 25
# Configurations that also record the ids of every non-ASCII sample: the real-model case.
ALL_NON_ASCII_IDS = {"qwen2"}
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Cases the corpus may miss: multi-character and context-sensitive case mappings, singleton and
# compatibility decompositions, canonical reordering, Hangul, composition exclusions, every
# White_Space character and near misses, embedded NUL, and an added token with normalized=true.
# U+180E is left out on purpose: Pagoda's regexes run on PCRE2, whose \s still matches it, while
# tokenizers' Oniguruma does not (a known gap of tokenizer/unicode_regex, not of the normalizers).
EXTRA_SAMPLES = [
    "",
    " ",
    "\u3000\u00a0 \t\nab c\u2028\u200b\u0085\x1c",
    "\x1c\x1d\x1e\x1f x \x1f",
    "\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205fx\u2029",
    "\u0085\u000b\u000c\r \u200b\ufeff",
    "İstanbul İİ iİ",
    "ΟΔΟΣ ΣΑΣ ΑΣ. Σ",
    "Ǆ ǅ ǆ ǈ ǋ ǲ",
    "ẞ ß ŉ ǰ ΐ ᾈ ᾼ ῼ",
    "Ⅻ Ⓐ 𐐀𐐁 Ꭰ ꭰ Ａ",
    "ﬁ ﬂ ﬃ ﬀ\u0301 ẛ\u0323 ſ",
    "① ② ⑩ ⁵ ₂ ½ ㍿ ㌀ ™ …",
    "ｶﾀｶﾅ ＡＢＣ ﾞ ｶﾞ",
    "Å Ω K \u212b\u2126\u212a",
    "q\u0307\u0323 q\u0323\u0307 a\u0301\u0316\u0300",
    "가각 \u1100\u1161\u11a8 \u1100\u1161 \uac00\u11a8",
    "e\u0301 é E\u0301 É",
    "a\u0300\u0903\u20ddb \u0903 \u20dd",
    "\u0344 \u0f73 \u0958 \u2adc \ufb2c \U0001d15e",
    "x\u0000y\u0000",
    "Ä\u0308 \u00c5\u030a Ṩ ṩ",
    "Crème Brûlée à la Façade — Ångström, naïve, Zoë",
    "Việt Nam, Tiếng Việt có dấu",
    "<Think>yes</Think> <THINK>no<think>maybe",
    "<|im_start|>user\nÉcole ﬁnale<|im_end|>",
    "  \t  ",
    "\u00a0x\u00a0",
]


def read_corpus():
    with open(os.path.join(DATA, "corpus.txt"), encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")[:-1]
    with open(os.path.join(DATA, "corpus_multiline.jsonl"), encoding="utf-8") as f:
        multi = [json.loads(line) for line in f.read().split("\n") if line]
    return lines, multi


def byte_level_pipeline(tok):
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()


def qwen2_pipeline(tok):
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)


N = normalizers
# name -> (normalizer, pipeline, extra added tokens)
CONFIGS = {
    "nfc": (N.NFC(), byte_level_pipeline, []),
    "nfd": (N.NFD(), byte_level_pipeline, []),
    "nfkc": (N.NFKC(), byte_level_pipeline, []),
    "nfkd": (N.NFKD(), byte_level_pipeline, []),
    "lowercase": (N.Lowercase(), byte_level_pipeline,
                  [AddedToken("<Think>", normalized=True, special=False)]),
    "nfkc_lowercase": (N.Sequence([N.NFKC(), N.Lowercase()]), byte_level_pipeline,
                       [AddedToken("<Think>", normalized=True, special=False)]),
    "strip": (N.Strip(), byte_level_pipeline, []),
    "strip_right": (N.Strip(left=False, right=True), byte_level_pipeline, []),
    "strip_accents": (N.StripAccents(), byte_level_pipeline, []),
    "nfd_strip_accents": (N.Sequence([N.NFD(), N.StripAccents(), N.NFC()]), byte_level_pipeline,
                          []),
    "replace": (N.Sequence([N.Replace(Regex(r"\s+"), " "), N.Replace("ﬁ", "fi"),
                            N.Replace(Regex(r"\p{Sc}"), "$1"), N.Strip()]),
                byte_level_pipeline, []),
    "qwen2": (N.NFC(), qwen2_pipeline, []),
}


def train(texts):
    tok = Tokenizer(models.BPE())
    byte_level_pipeline(tok)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    return tok.to_str()


def write_golden(name, tok, samples, versions):
    path = os.path.join(OUT, "expected", name + ".jsonl")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps({"meta": versions, "normalizer": name}) + "\n")
        for key, text, with_ids in samples:
            rec = dict(key)
            normalized = tok.normalizer.normalize_str(text)
            if normalized != text:
                rec["normalized"] = normalized
            non_ascii = any(ord(c) > 0x7F for c in text)
            if with_ids or (non_ascii and (normalized != text or name in ALL_NON_ASCII_IDS)):
                rec["ids"] = tok.encode(text, add_special_tokens=False).ids
            if len(rec) > 1:
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print(name, "->", path)


def main():
    versions = {"tokenizers": tokenizers.__version__, "python": platform.python_version()}
    lines, multi = read_corpus()
    base = train(lines + multi)
    samples = []
    for i, text in enumerate(lines):
        with_ids = i % IDS_EVERY == 0
        samples.append(({"i": i}, text, with_ids))
    for i, text in enumerate(multi):
        samples.append(({"i": len(lines) + i}, text, True))
    for text in EXTRA_SAMPLES:
        samples.append(({"text": text}, text, True))
    for name, (normalizer, pipeline, added) in CONFIGS.items():
        tok = Tokenizer.from_str(base)
        pipeline(tok)
        tok.normalizer = normalizer
        if added:
            tok.add_tokens(added)
        folder = os.path.join(OUT, name)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(json.loads(tok.to_str()), f, ensure_ascii=False, separators=(",", ":"))
        write_golden(name, tok, samples, versions)


if __name__ == "__main__":
    sys.exit(main())
