"""Helpers shared by the forward-pass golden scripts (tool versions, fp64 patches, JSON output)."""

import json
import math
import platform
from importlib.metadata import PackageNotFoundError, version

import torch


def tool_versions():
    out = {"python": platform.python_version()}
    for pkg in ("transformers", "torch", "gguf", "tokenizers", "safetensors", "numpy", "accelerate"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def f32(x):
    """A float rounded to 9 significant digits: round-trips any fp32 value exactly."""
    return float(f"{float(x):.9g}")


# --- float64 reference ---------------------------------------------------------------------------
# transformers' Llama/Qwen2 code keeps two pieces in float32 whatever the model dtype: RMSNorm
# (casts its input to float32) and the rotary tables (inv_freq and position*inv_freq in float32).
# With model.double() alone the "fp64" run would still carry fp32 rounding there, so for the fp64
# reference both are replaced by float64 versions (same math). Attention uses SDPA, which computes in
# the input dtype (the eager path would force its softmax to float32).

def llama3_inv_freq_f64(theta, head_dim, factor, low_freq_factor, high_freq_factor, original_max):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    low_wavelen = original_max / low_freq_factor
    high_wavelen = original_max / high_freq_factor
    out = []
    for f in inv.tolist():
        wavelen = 2 * math.pi / f
        if wavelen < high_wavelen:
            out.append(f)
        elif wavelen > low_wavelen:
            out.append(f / factor)
        else:
            smooth = (original_max / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            out.append((1 - smooth) * f / factor + smooth * f)
    return torch.tensor(out, dtype=torch.float64)


def inv_freq_f64(config):
    rp = dict(config.rope_parameters)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    theta = float(rp["rope_theta"])
    if rp.get("rope_type", "default") == "default":
        return 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    if rp["rope_type"] == "llama3":
        return llama3_inv_freq_f64(theta, head_dim, float(rp["factor"]), float(rp["low_freq_factor"]),
                                   float(rp["high_freq_factor"]),
                                   float(rp["original_max_position_embeddings"]))
    raise NotImplementedError(rp["rope_type"])


def make_fp64(model):
    """Casts the model to float64 and makes RMSNorm and RoPE compute in float64 too."""
    model.double()
    inv64 = inv_freq_f64(model.config)
    # the float64 table must agree with transformers' float32 one (same formula, less rounding)
    rot = model.model.rotary_emb
    assert torch.allclose(inv64, rot.inv_freq.double(), rtol=1e-6, atol=0), (inv64, rot.inv_freq)
    assert rot.attention_scaling == 1.0

    def rope_forward(self, x, position_ids):
        freqs = position_ids[..., None].double() * inv64.to(x.device)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    def rms_forward(self, h):
        h = h.double()
        var = h.pow(2).mean(-1, keepdim=True)
        return self.weight * (h * torch.rsqrt(var + self.variance_epsilon))

    rot.forward = rope_forward.__get__(rot)
    for mod in model.modules():
        if type(mod).__name__.endswith("RMSNorm"):
            mod.forward = rms_forward.__get__(mod)
    return model


# --- JSON: dicts indented, lists of scalars on one line ------------------------------------------

def dumps(obj, indent=0):
    pad = " " * indent
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f'{pad} {json.dumps(k)}: {dumps(v, indent + 1)}' for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list):
        if all(not isinstance(v, (dict, list)) for v in obj):
            return json.dumps(obj, ensure_ascii=False)
        items = [f"{pad} {dumps(v, indent + 1)}" for v in obj]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(obj, ensure_ascii=False)


def write_json(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(obj) + "\n", encoding="utf-8")
