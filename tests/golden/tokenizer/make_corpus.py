#!/usr/bin/env python3
"""Builds the tokenizer test corpus: tests/data/tokenizer/corpus.txt (one sample per line) and
corpus_multiline.jsonl (one JSON string per line, for samples holding newlines or carriage returns).

Run with the dev venv (scripts/setup_dev_venv.sh creates .venv-dev):
    python3 tests/golden/tokenizer/make_corpus.py [LLAMA_CPP_MODELS_DIR]

Every sample is written here or generated from the Python stdlib (unicodedata, module docstrings
and sources) and numpy's C headers. LLAMA_CPP_MODELS_DIR optionally points at the `models/` folder
of the llama-cpp-python 0.3.36 sdist (`pip download --no-deps --no-binary :all:
llama-cpp-python==0.3.36`); its ggml-vocab-*.gguf.inp files (inputs only) join the multi-line set.
The output is deterministic (fixed seed) so that reruns do not churn the golden data.
"""
import glob
import inspect
import json
import os
import random
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "..", "data", "tokenizer"))
rng = random.Random(20240611)

PROSE = [
    "The quick brown fox jumps over the lazy dog.",
    "Pagoda serves large language models from one native binary.",
    "It's a truth universally acknowledged that you'll need more memory than you've got.",
    "She said: \"I don't know; we'll see what they're doing tomorrow.\"",
    "Tokenizers split text into pieces that a model has learned to read.",
    "In 1969, Apollo 11 landed on the Moon after a flight of 384,400 km.",
    "Prices rose 3.75% in Q2 2023, from $1,299.99 to $1,348.70.",
    "CAPITAL LETTERS AND lower letters AnD mIxEd CaSe.",
    "e-mail: someone@example.com, url: https://example.org/path?q=1&r=two#frag",
    "Well... that's odd!!! Isn't it??? (Yes.) [No.] {Maybe.}",
    "Mr. O'Neil's dog's bone wasn't where he'd left it; they'd moved it.",
    "A sentence with    four spaces, and\ttabs\t\tbetween words.",
    "Trailing spaces at the end   ",
    "   leading spaces at the start",
    "HELLO WORLD hello world Hello World",
    "don't DON'T Don't won't WON'T I'M I'm we'LL we'll",
]

CODE = [
    "int main(int argc, char** argv) { return argc > 1 ? 0 : 1; }",
    "for (size_t i = 0; i < n; ++i) sum += a[i] * b[i];",
    "template <typename T> std::vector<T> take(std::span<const T> xs, size_t k);",
    "fn main() { let v: Vec<u32> = (0..10).map(|x| x * x).collect(); println!(\"{:?}\", v); }",
    "func (s *Server) Serve(ctx context.Context) error { return s.listener.Accept() }",
    "const add = (a, b) => a + b; console.log(`sum=${add(2, 3)}`);",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC LIMIT 10;",
    "<div class=\"box\"><a href='/x?y=1&amp;z=2'>link</a></div>",
    "#!/bin/bash\tset -euo pipefail; for f in *.txt; do wc -l \"$f\"; done",
    "x = {'a': [1, 2, 3], \"b\": (4.5, -6e-7), 'c': None}",
    "\\documentclass{article} \\begin{equation} E = mc^2 \\end{equation}",
    "public static void main(String[] args) { System.out.println(\"Hi\"); }",
    "if err != nil { return fmt.Errorf(\"open %s: %w\", path, err) }",
    "regex: ^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+)@(?:[a-z0-9-]+\\.)+[a-z]{2,}$",
    "0x7fffffff 0b1010 0o777 1e10 3.14159 -0.0 1_000_000",
]

SPECIAL_TEXT = [
    "<|im_start|>user\tHello<|im_end|>",
    "<|im_start|>assistant Sure!<|im_end|><|endoftext|>",
    "<s>[INST] What is 2+2? [/INST] 4</s>",
    "<s> <s><s>  </s></s> </s>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>hi<|eot_id|>",
    "<|endoftext|>The end.<|endoftext|>",
    "text<|im_start|>glued<|im_end|>text",
    "<|im_start <|im_end| |im_start|> <|endoftext",
    "<unk> <pad> <mask> [CLS] [SEP] <0x41> <0xE4>",
    "<think>reasoning</think> answer <tool_call>{}</tool_call>",
    "<repo_name>pagoda<file_sep>main.cc<filename>x.py<gh_stars>100",
    " <|im_start|> spaced <|im_end|> ",
]

ODD = [
    "caf\u00e9 vs cafe\u0301 (NFC vs NFD)",
    unicodedata.normalize("NFD", "\u00c5ngstr\u00f6m \u00fcber na\u00efve r\u00e9sum\u00e9"),
    unicodedata.normalize("NFC", "\u00c5ngstr\u00f6m \u00fcber na\u00efve r\u00e9sum\u00e9"),
    "zero\u200bwidth\u200cnon\u200djoiner\u2060word\ufeffbom",
    "RTL \u200fmark\u200e LTR \u202eoverride\u202c done \u2067isolate\u2069",
    "replacement \ufffd char \ufffd\ufffd and private use \ue000\uf8ff\U000f0000",
    "noncharacter \ufdd0 \uffff and specials \ufff9\ufffa\ufffb",
    "combining a\u0300\u0301\u0302\u0303\u0304 e\u0327\u0306 o\u0308\u0304 Z\u0335\u0336\u0337",
    "ligatures \ufb01\ufb02 fullwidth \uff21\uff22\uff23\uff11\uff12\uff13 superscript x\u00b2\u00b3",
    "math \U0001d400\U0001d401\U0001d402 \u2200x\u2208\u211d: x\u00b2\u22650 \u221e \u2211 \u222b",
    "control chars \x01\x02\x7f and nbsp\u00a0here\u2003em\u3000ideographic",
    "\u00bd \u2153 \u2155 \u0663\u0664\u0665 \u0967\u0968\u0969 \u2460\u2461 \u216b",
    "ied 4 \u00bd months",
]

EMOJI = [
    "\U0001f600\U0001f601\U0001f602\U0001f923\U0001f60d \U0001f999.cpp",
    "family \U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 couple \U0001f469\u200d\u2764\ufe0f\u200d\U0001f468",
    "thumbs \U0001f44d \U0001f44d\U0001f3fb \U0001f44d\U0001f3fc \U0001f44d\U0001f3fd \U0001f44d\U0001f3fe \U0001f44d\U0001f3ff",
    "flags \U0001f1fa\U0001f1f8 \U0001f1ef\U0001f1f5 \U0001f1e9\U0001f1ea \U0001f1e7\U0001f1f7 \U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",
    "keycaps 1\ufe0f\u20e3 #\ufe0f\u20e3 *\ufe0f\u20e3 hearts \u2764\ufe0f \u2665 \u2764",
    "\U0001f9d1\u200d\U0001f4bb\U0001f3f3\ufe0f\u200d\U0001f308\U0001f415\u200d\U0001f9ba",
]

SCRIPTS = {
    "Cyrillic": [(0x0410, 0x044F)],
    "Greek": [(0x0391, 0x03A9), (0x03B1, 0x03C9)],
    "Hebrew": [(0x05D0, 0x05EA)],
    "Arabic": [(0x0621, 0x064A)],
    "Devanagari": [(0x0905, 0x0939), (0x093E, 0x094C)],
    "Thai": [(0x0E01, 0x0E2E), (0x0E30, 0x0E3A)],
    "Hangul": [(0xAC00, 0xD7A3)],
    "Hiragana": [(0x3041, 0x3096)],
    "Katakana": [(0x30A1, 0x30FA)],
    "CJK": [(0x4E00, 0x9FFF)],
    "Armenian": [(0x0531, 0x0556), (0x0561, 0x0586)],
    "Georgian": [(0x10D0, 0x10FA)],
    "Ethiopic": [(0x1200, 0x1248)],
    "Tamil": [(0x0B85, 0x0BB9)],
    "Bengali": [(0x0985, 0x09B9)],
    "Latin-Ext": [(0x00C0, 0x024F)],
}
PUNCT = [" ", " ", " ", ", ", ". ", "! ", "? ", " - ", "\u3001", "\u3002", "\u060c ", "  "]


def script_line(ranges):
    chars = [chr(c) for lo, hi in ranges for c in range(lo, hi + 1) if unicodedata.category(chr(c)) != "Cn"]
    words = ["".join(rng.choice(chars) for _ in range(rng.randint(1, 8))) for _ in range(rng.randint(2, 12))]
    out = words[0]
    for w in words[1:]:
        out += rng.choice(PUNCT) + w
    return out


def docstring_lines():
    names = ["json", "re", "collections", "functools", "itertools", "os", "pathlib", "string",
             "textwrap", "typing", "argparse", "logging", "unicodedata", "random", "statistics",
             "datetime", "decimal", "fractions", "heapq", "bisect", "csv", "difflib", "email",
             "http.client", "urllib.parse", "zipfile", "tarfile", "subprocess", "threading", "asyncio"]
    lines = []
    for name in names:
        module = __import__(name, fromlist=["_"])
        for obj in [module] + [getattr(module, a) for a in sorted(dir(module)) if not a.startswith("_")]:
            doc = inspect.getdoc(obj) if (inspect.ismodule(obj) or inspect.isclass(obj) or inspect.isfunction(obj)) else None
            if doc:
                lines.extend(l for l in doc.splitlines() if l.strip())
    return lines


def source_lines(pattern, limit):
    lines = []
    for path in sorted(glob.glob(pattern))[:40]:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines.extend(l.rstrip("\n") for l in f if l.strip() and "\r" not in l)
    rng.shuffle(lines)
    return lines[:limit]


def numbers():
    out = []
    for n in range(1, 41):
        out.append("".join(rng.choice("0123456789") for _ in range(n)))
    out += ["3.14159265358979323846264338327950288419716939937510", "1,234,567,890", "000123 0.000001",
            "2024-06-11T12:34:56Z", "+1 (555) 123-4567", "v1.2.3-rc.4+build.5", "12345678901234567890" * 5]
    return out


def whitespace_samples():
    return [" ", "  ", "   ", "\t", "\t\t", " \t ", "a  b   c    d", "x\t\ty", "end ", "  both  ",
            " " * 40 + "deep", "\u00a0\u00a0nbsp", "\u3000\u3000full"]


def multiline_samples():
    out = ["\n", "\n\n", "\n\n\n", "\r\n", "a\nb", "a\r\nb\r\n", "line one\n\nline three\n",
           "def f(x):\n    return x * 2\n\n\nprint(f(3))\n", "\t\n\t\n", " \n \n ",
           "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
           "# Title\n\n- item 1\n- item 2\n\n```python\nprint('x')\n```\n",
           "\u4f60\u597d\n\u4e16\u754c\r\n\U0001f600\n", "trailing newline\n", "\n\nleading newlines",
           "  \n  indented\n    more\n", "\r", "\r\r\n\n", "\u2028line sep\u2029para sep\u0085nel"]
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "ggml-vocab-*.gguf.inp"))) if len(sys.argv) > 1 else []:
        with open(path, encoding="utf-8") as f:
            out.extend(f.read().split("\n__ggml_vocab_test__\n"))
    seen = set()
    return [s for s in out if not (s in seen or seen.add(s))]


def main():
    lines = PROSE + CODE + SPECIAL_TEXT + ODD + EMOJI + numbers() + whitespace_samples()
    for name, ranges in SCRIPTS.items():
        lines += [script_line(ranges) for _ in range(40)]
    mixed = [script_line(rng.choice(list(SCRIPTS.values()))) for _ in range(100)]
    lines += [a + " " + rng.choice(EMOJI + ODD + PROSE) + " " + b for a, b in zip(mixed[::2], mixed[1::2])]
    lines += docstring_lines()[:900]
    lines += source_lines(os.path.join(os.path.dirname(os.__file__), "*.py"), 500)
    lines += source_lines(os.path.join(os.path.dirname(__import__("numpy").__file__), "_core", "include", "numpy", "*.h"), 200)
    seen = set()
    lines = [l for l in lines if "\n" not in l and "\r" not in l and not (l in seen or seen.add(l))]
    lines.append("x" * 3000 + " " + "\u00e9" * 500 + " " + "-" * 500)
    os.makedirs(DATA, exist_ok=True)
    with open(os.path.join(DATA, "corpus.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(DATA, "corpus_multiline.jsonl"), "w", encoding="utf-8", newline="\n") as f:
        for s in multiline_samples():
            f.write(json.dumps(s, ensure_ascii=False) + "\n")
    print(len(lines), "lines")


if __name__ == "__main__":
    main()
