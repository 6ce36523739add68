"""Minimal safetensors writer in numpy, so the quantization scripts run in the CI venv (numpy and
gguf only; no torch, no safetensors package). Format: u64 little-endian header length, the JSON
header {name: {"dtype", "shape", "data_offsets"}}, then the raw little-endian tensor bytes.
bfloat16 and float8_e4m3 tensors are passed as (uint16 / uint8 array, "BF16" / "F8_E4M3")."""

import json
import struct

import numpy as np

_DTYPES = {
    np.dtype(np.float32): "F32",
    np.dtype(np.float16): "F16",
    np.dtype(np.int32): "I32",
    np.dtype(np.int64): "I64",
    np.dtype(np.uint8): "U8",
}


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: ndarray or (ndarray of raw bits, safetensors dtype name)}."""
    header = {}
    blobs = []
    offset = 0
    for name, value in tensors.items():
        if isinstance(value, tuple):
            array, dtype = value
        else:
            array, dtype = value, _DTYPES[value.dtype]
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def float_to_bf16_bits(values):
    """float32 -> bfloat16 bits, rounded to nearest even (as torch does)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    return ((bits + rounding) >> 16).astype(np.uint16)


def bf16_bits_to_float(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)
