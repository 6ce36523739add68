#!/usr/bin/env python3
"""Renders the golden data for the chat template tests with Python jinja2, through transformers.

Run with the dev venv (scripts/setup_dev_venv.sh creates .venv-dev), from the repository root:
    .venv-dev/bin/python tests/golden/template/make_golden.py
Never run in CI. It writes:
  tests/data/template/templates/SmolLM2-135M-Instruct.jinja  (from the GGUF metadata)
  tests/data/template/chat_golden.json      (every template x every conversation)
  tests/data/template/language_golden.json  (one small template per Jinja construct)
"""

import datetime as _datetime
import json
import pathlib
import sys

import gguf
import jinja2
import transformers
from transformers.utils import chat_template_utils

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from language_cases import LANGUAGE_CASES  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "template"
GGUF_MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"

# strftime_now() reads the clock; the C++ test injects the same instant.
FIXED_NOW = _datetime.datetime(2025, 3, 14, 9, 26, 53)


class _FixedDatetime(_datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return FIXED_NOW


chat_template_utils.datetime = _FixedDatetime

# Special tokens each model's tokenizer passes to its template (bos_token, eos_token).
SPECIAL_TOKENS = {
    "SmolLM2-135M-Instruct": ("<|im_start|>", "<|im_end|>"),
    "meta-llama-Llama-3.1-8B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.2-3B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "Qwen-Qwen2.5-7B-Instruct": ("", "<|im_end|>"),
    "mistralai-Mistral-Nemo-Instruct-2407": ("<s>", "</s>"),
    "Mistral-Small-3.2-24B-Instruct-2506": ("<s>", "</s>"),
    "google-gemma-2-2b-it": ("<bos>", "<eos>"),
    "google-gemma-3-it": ("<bos>", "<eos>"),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "Qwen-Qwen3-0.6B": ("", "<|im_end|>"),
    "microsoft-Phi-3.5-mini-instruct": ("<s>", "<|endoftext|>"),
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": ("<|begin_of_text|>", "<|im_end|>"),
    "HuggingFaceTB-SmolLM3-3B": ("", "<|im_end|>"),
    "ibm-granite-granite-3.3-2B-Instruct": ("<|end_of_text|>", "<|end_of_text|>"),
    "Qwen3-Coder": ("", "<|im_end|>"),
    "openai-gpt-oss-120b": ("<|startoftext|>", "<|return|>"),
    "meetkai-functionary-medium-v3.2": ("<|begin_of_text|>", "<|eot_id|>"),
}


def extract_smollm2_template():
    reader = gguf.GGUFReader(str(GGUF_MODEL))
    field = reader.fields["tokenizer.chat_template"]
    text = bytes(field.parts[field.data[0]]).decode("utf-8")
    (DATA / "templates" / "SmolLM2-135M-Instruct.jinja").write_text(text, encoding="utf-8")


def render_chat(source, conversation, bos, eos):
    kwargs = dict(conversation.get("kwargs", {}))
    rendered, _ = chat_template_utils.render_jinja_template(
        conversations=[conversation["messages"]],
        tools=conversation.get("tools"),
        chat_template=source,
        add_generation_prompt=conversation["add_generation_prompt"],
        bos_token=bos,
        eos_token=eos,
        **kwargs,
    )
    return rendered[0]


def outcome(fn):
    try:
        return {"output": fn()}
    except jinja2.exceptions.TemplateError as e:
        return {"error": str(e)}
    except Exception as e:  # noqa: BLE001 - any Python-side failure means our render must fail too
        return {"error": f"{type(e).__name__}: {e}"}


def versions():
    return {"jinja2": jinja2.__version__, "transformers": transformers.__version__,
            "gguf": getattr(gguf, "__version__", "unknown"), "python": sys.version.split()[0],
            "strftime_now": FIXED_NOW.isoformat()}


def make_chat_golden():
    conversations = json.loads((DATA / "conversations.json").read_text(encoding="utf-8"))
    cases = []
    for stem, (bos, eos) in SPECIAL_TOKENS.items():
        source = (DATA / "templates" / f"{stem}.jinja").read_text(encoding="utf-8")
        for conversation in conversations:
            case = {"template": f"{stem}.jinja", "conversation": conversation["name"],
                    "bos_token": bos, "eos_token": eos}
            case.update(outcome(lambda: render_chat(source, conversation, bos, eos)))
            cases.append(case)
    return {"versions": versions(), "cases": cases}


def make_language_golden():
    cases = []
    for name, source, context in LANGUAGE_CASES:
        case = {"name": name, "template": source, "context": context}
        template = chat_template_utils._compile_jinja_template
        case.update(outcome(lambda: template(source).render(**context)))
        cases.append(case)
    return {"versions": versions(), "cases": cases}


def write_json(path, value):
    path.write_text(json.dumps(value, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def main():
    extract_smollm2_template()
    write_json(DATA / "chat_golden.json", make_chat_golden())
    write_json(DATA / "language_golden.json", make_language_golden())


if __name__ == "__main__":
    main()
