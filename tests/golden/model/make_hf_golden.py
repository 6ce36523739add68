#!/usr/bin/env python3
"""Golden data for the Hugging Face folder reader and both ModelConfig readers, made with
`transformers`, `safetensors`, `tokenizers` and `torch`.

Run with the dev venv (scripts/setup_dev_venv.sh creates .venv-dev) from the repository root:

    .venv-dev/bin/python tests/golden/model/make_hf_golden.py

Writes into tests/data/model/:
  hf_llama/        tiny LlamaForCausalLM saved by save_pretrained (one model.safetensors), a
                   generation_config.json, a tokenizers-made tokenizer.json and a
                   tokenizer_config.json whose chat_template is a list of named templates;
                   plus extra.safetensors with tensors of every other dtype (F16, I64, U8, BOOL...)
  hf_qwen2_sharded/ tiny Qwen2ForCausalLM saved in shards (model.safetensors.index.json) and a
                   chat_template.jinja
  hf_llama3_v4/    the hf_llama weights under a transformers-4.x style config.json (rope_scaling
                   llama3, torch_dtype, eos list, no head_dim)
  hf_golden.json   per folder: the config as AutoConfig reads it, the generation defaults as
                   GenerationConfig reads them, and per tensor dtype, shape and values
  smollm2_config.json  the config transformers builds from the SmolLM2 GGUF (gguf_file=...)
"""

import json
import shutil
import sys
from importlib.metadata import version
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (AutoConfig, GenerationConfig, LlamaConfig, LlamaForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM)

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "tests" / "data" / "model"
TOOLS = {name: version(name) for name in ("transformers", "safetensors", "tokenizers", "torch")}
TOOLS["python"] = sys.version.split()[0]

TINY = dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)


def config_json(config) -> dict:
    rope = getattr(config, "rope_parameters", None) or {}
    eos = config.eos_token_id
    return {
        "architecture": config.model_type,
        "num_hidden_layers": config.num_hidden_layers,
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": config.num_key_value_heads,
        "head_dim": getattr(config, "head_dim", None)
        or config.hidden_size // config.num_attention_heads,
        "vocab_size": config.vocab_size,
        "max_position_embeddings": config.max_position_embeddings,
        "rms_norm_eps": config.rms_norm_eps,
        "rope_theta": rope.get("rope_theta"),
        "rope_type": rope.get("rope_type", "default"),
        "rope_factor": rope.get("factor"),
        "rope_low_freq_factor": rope.get("low_freq_factor"),
        "rope_high_freq_factor": rope.get("high_freq_factor"),
        "rope_original_max_position_embeddings": rope.get("original_max_position_embeddings"),
        "tie_word_embeddings": config.tie_word_embeddings,
        "attention_bias": getattr(config, "attention_bias", None),
        "bos_token_id": config.bos_token_id,
        "eos_token_ids": [] if eos is None else (eos if isinstance(eos, list) else [eos]),
        "dtype": str(config.dtype).removeprefix("torch.") if config.dtype is not None else None,
    }


def generation_json(folder: Path) -> dict:
    if not (folder / "generation_config.json").exists():
        return {}
    g = GenerationConfig.from_pretrained(folder)
    eos = g.eos_token_id
    return {
        "temperature": g.temperature, "top_p": g.top_p, "top_k": g.top_k,
        "do_sample": g.do_sample, "bos_token_id": g.bos_token_id,
        "eos_token_ids": [] if eos is None else (eos if isinstance(eos, list) else [eos]),
    }


def tensors_json(folder: Path) -> list:
    out = []
    for path in sorted(folder.glob("*.safetensors")):
        with safe_open(path, framework="pt") as f:
            for name in f.keys():
                t = f.get_tensor(name)
                is_float = t.dtype.is_floating_point
                values = t.float() if is_float else t.to(torch.int64)
                out.append({
                    "file": path.name,
                    "name": name,
                    "dtype": str(t.dtype).removeprefix("torch."),
                    "shape": list(t.shape),
                    "values": [float(v) if is_float else int(v) for v in values.reshape(-1)],
                })
    return out


def make_tokenizer(folder: Path) -> None:
    vocab = {chr(ord("a") + i): i for i in range(26)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(r"\s+", "removed"), pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tokenizer.save(str(folder / "tokenizer.json"))


def fresh(name: str) -> Path:
    folder = OUT / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def make_llama() -> Path:
    folder = fresh("hf_llama")
    torch.manual_seed(0)
    config = LlamaConfig(**TINY, rope_theta=50000.0, rms_norm_eps=1e-5, bos_token_id=1,
                         eos_token_id=2, tie_word_embeddings=False)
    LlamaForCausalLM(config).save_pretrained(folder)
    GenerationConfig(bos_token_id=1, eos_token_id=[2, 5], temperature=0.6, top_p=0.9, top_k=20,
                     do_sample=True).save_pretrained(folder)
    make_tokenizer(folder)
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "chat_template": [
            {"name": "default", "template": "{{ messages[0]['content'] }}"},
            {"name": "tool_use", "template": "{{ tools }}"},
        ],
    }, indent=1) + "\n")
    extra = {
        "extra.f16": torch.tensor([[0.5, -2.0, 65504.0]], dtype=torch.float16),
        "extra.bf16": torch.tensor([1.0, -0.0078125, 3.0e38], dtype=torch.bfloat16),
        "extra.f64": torch.tensor([0.1], dtype=torch.float64),
        "extra.i64": torch.tensor([-(2 ** 40), 7], dtype=torch.int64),
        "extra.i32": torch.tensor([[-5], [6]], dtype=torch.int32),
        "extra.u8": torch.tensor([0, 255], dtype=torch.uint8),
        "extra.bool": torch.tensor([True, False, True], dtype=torch.bool),
        "extra.i8": torch.tensor([-128, 127], dtype=torch.int8),
        "extra.empty": torch.zeros((0, 3), dtype=torch.float32),
    }
    save_file(extra, folder / "extra.safetensors", metadata={"format": "pt", "note": "golden"})
    return folder


def make_qwen2_sharded() -> Path:
    folder = fresh("hf_qwen2_sharded")
    torch.manual_seed(1)
    config = Qwen2Config(**TINY, rope_theta=1000000.0, rms_norm_eps=1e-6, bos_token_id=3,
                         eos_token_id=4, tie_word_embeddings=True)
    Qwen2ForCausalLM(config).save_pretrained(folder, max_shard_size="8KB")
    (folder / "chat_template.jinja").write_text(
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}")
    return folder


def make_llama3_v4(llama: Path) -> Path:
    folder = fresh("hf_llama3_v4")
    shutil.copy(llama / "model.safetensors", folder / "model.safetensors")
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": 64, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
        "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
        "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 64, "rope_type": "llama3"},
        "bos_token_id": 1, "eos_token_id": [2, 7, 9], "torch_dtype": "bfloat16",
        "tie_word_embeddings": False, "transformers_version": "4.45.0",
    }, indent=2) + "\n")
    return folder


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    llama = make_llama()
    folders = [llama, make_qwen2_sharded(), make_llama3_v4(llama)]
    golden = {"tools": TOOLS, "folders": {}}
    for folder in folders:
        config = config_json(AutoConfig.from_pretrained(folder))
        tensors = tensors_json(folder)
        if config["attention_bias"] is None:
            # Qwen2Config has no attention_bias: Qwen2's q/k/v projections always carry biases.
            config["attention_bias"] = any(t["name"].endswith("q_proj.bias") for t in tensors)
        golden["folders"][folder.name] = {
            "config": config,
            "generation": generation_json(folder),
            "tensors": tensors,
        }
    (OUT / "hf_golden.json").write_text(json.dumps(golden, indent=1) + "\n")

    smollm2 = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    config = AutoConfig.from_pretrained(smollm2.parent, gguf_file=smollm2.name)
    (OUT / "smollm2_config.json").write_text(
        json.dumps({"tools": TOOLS, "config": config_json(config)}, indent=1) + "\n")


if __name__ == "__main__":
    main()
