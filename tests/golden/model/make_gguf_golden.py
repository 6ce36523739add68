#!/usr/bin/env python3
"""Golden data for the GGUF reader and the dequantizers, made with the PyPI `gguf` package.

Run with the dev venv (scripts/setup_dev_venv.sh creates .venv-dev) from the repository root,
after scripts/setup.sh has fetched the models:

    .venv-dev/bin/python tests/golden/model/make_gguf_golden.py

Writes into tests/data/model/:
  smollm2_gguf.json     metadata and tensor infos of the default model as gguf.GGUFReader sees them
  smollm2_dequant.json  per tensor: checksum, sum, sum of squares and sample values of the float32
                        values gguf.quants.dequantize returns
  quants.gguf           synthetic tensors of every dequantizable type, each beside an F32 tensor
                        "expected.<name>" holding gguf.quants.dequantize's output
  value_types_v3.gguf   one metadata entry of every value type (nested arrays too) and a tensor;
  value_types_v2.gguf   the same bytes with the version field set to 2 (v2 and v3 differ only in
                        the version number for little-endian files)
  value_types.json      what gguf.GGUFReader reads back from value_types_v3.gguf
  ggml_types.json       every ggml type gguf knows: number, block size, bytes per block

The checksum of float32 values x[0..n) is sum((bits(x[i]) as uint64) * (2*i + 1)) mod 2^64: every
single changed value or swapped pair changes it, and numpy computes it in one pass.
"""

import json
import sys
from importlib.metadata import version
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "tests" / "data" / "model"
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
SAMPLE = 16

TOOLS = {"gguf": version("gguf"), "numpy": version("numpy"), "python": sys.version.split()[0]}


def checksum(values: np.ndarray) -> str:
    bits = np.ascontiguousarray(values, dtype=np.float32).reshape(-1).view(np.uint32)
    weights = np.arange(bits.size, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    with np.errstate(over="ignore"):
        total = np.sum(bits.astype(np.uint64) * weights, dtype=np.uint64)
    return f"{int(total):016x}"


def floats(values: np.ndarray) -> list:
    # float32 -> Python float is exact, and JSON doubles round-trip.
    return [float(v) for v in np.asarray(values, dtype=np.float32).reshape(-1)]


def field_json(field) -> dict:
    types = [t.name for t in field.types]
    entry = {"key": field.name, "type": types[0]}
    if field.types[0] != V.ARRAY:
        value = field.contents()
        entry["value"] = float(value) if isinstance(value, (float, np.floating)) else value
        return entry
    entry["element_type"] = types[1]
    if len(field.types) > 2:  # nested: gguf-py exposes only the flattened leaves
        entry["leaves"] = [field.parts[i].tolist()[0] for i in field.data]
        return entry
    items = field.contents()
    entry["count"] = len(items)
    entry["head"] = items[:5]
    entry["tail"] = items[-5:]
    return entry


def smollm2_golden() -> None:
    reader = gguf.GGUFReader(MODEL)
    meta = [field_json(f) for name, f in reader.fields.items() if not name.startswith("GGUF.")]
    tensors = [{
        "name": t.name,
        "type": t.tensor_type.name,
        "dims": [int(d) for d in t.shape],  # gguf order: innermost first
        "n_elements": int(t.n_elements),
        "n_bytes": int(t.n_bytes),
        "file_offset": int(t.data_offset),
    } for t in reader.tensors]
    golden = {
        "tools": TOOLS,
        "file": MODEL.name,
        "version": int(reader.fields["GGUF.version"].contents()),
        "alignment": int(reader.alignment),
        "data_offset": int(reader.data_offset),
        "metadata": meta,
        "tensors": tensors,
    }
    (OUT / "smollm2_gguf.json").write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")

    deq = []
    for t in reader.tensors:
        values = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        rows = values.reshape(-1, int(t.shape[0]))
        as64 = values.astype(np.float64)
        deq.append({
            "name": t.name,
            "type": t.tensor_type.name,
            "checksum": checksum(values),
            "sum": float(as64.sum()),
            "sum_squares": float((as64 * as64).sum()),
            "first_row_head": floats(rows[0, :SAMPLE]),
            "last_row_tail": floats(rows[-1, -SAMPLE:]),
        })
    (OUT / "smollm2_dequant.json").write_text(
        json.dumps({"tools": TOOLS, "file": MODEL.name, "tensors": deq}, indent=1) + "\n")


# Byte offsets of the fp16 scale fields inside one block, so random blocks get finite scales.
FP16_FIELDS = {
    Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q8_0: [0],
    Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208],
}
QUANTIZABLE = [Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.BF16, Q.F16]


def random_blocks(rng, qtype, rows: int, row_len: int) -> np.ndarray:
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    n_blocks = rows * row_len // block_size
    blocks = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for off in FP16_FIELDS[qtype]:
        scale = rng.uniform(-0.05, 0.05, size=n_blocks).astype(np.float16)
        blocks[:, off:off + 2] = scale.view(np.uint8).reshape(n_blocks, 2)
    return blocks.reshape(rows, row_len // block_size * type_size)


def quants_golden() -> None:
    rng = np.random.default_rng(20261122)
    rows, row_len = 3, 512
    writer = gguf.GGUFWriter(OUT / "quants.gguf", "llama")
    writer.add_string("pagoda.golden.tools", json.dumps(TOOLS))

    def add(name: str, raw: np.ndarray, qtype) -> None:
        writer.add_tensor(name, raw, raw_dtype=qtype)
        expected = gguf.quants.dequantize(raw, qtype).astype(np.float32)
        writer.add_tensor("expected." + name, expected)

    for qtype in FP16_FIELDS:
        add("random." + qtype.name, random_blocks(rng, qtype, rows, row_len), qtype)
    # Plain floats, including the values conversions get wrong: subnormals, infinities, -0.
    special = np.array([0.0, -0.0, np.inf, -np.inf, 6.0e-8, -6.0e-8, 65504.0, 1e-40],
                       dtype=np.float32)
    plain = rng.normal(0, 3, size=rows * row_len).astype(np.float32)
    plain[:special.size] = special
    plain = plain.reshape(rows, row_len)
    add("random.F16", plain.astype(np.float16).view(np.uint8), Q.F16)
    bf16_bits = rng.integers(0, 1 << 16, size=(rows, row_len), dtype=np.uint16)
    bf16_bits[(bf16_bits & 0x7F80) == 0x7F80] &= 0xBFFF  # keep NaN out of the comparison
    add("random.BF16", bf16_bits.view(np.uint8), Q.BF16)
    weights = rng.normal(0, 0.02, size=(rows, row_len)).astype(np.float32)
    for qtype in QUANTIZABLE:
        add("quantized." + qtype.name, gguf.quants.quantize(weights, qtype), qtype)
    writer.add_tensor("plain.F32", plain)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def value_types_golden() -> None:
    path = OUT / "value_types_v3.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_uint8("t.u8", 200)
    writer.add_int8("t.i8", -100)
    writer.add_uint16("t.u16", 60000)
    writer.add_int16("t.i16", -30000)
    writer.add_uint32("t.u32", 4000000000)
    writer.add_int32("t.i32", -2000000000)
    writer.add_uint64("t.u64", 18000000000000000000)
    writer.add_int64("t.i64", -9000000000000000000)
    writer.add_float32("t.f32", 0.1)
    writer.add_float64("t.f64", 0.1)
    writer.add_bool("t.true", True)
    writer.add_bool("t.false", False)
    writer.add_string("t.str", "héllo, 世界")
    writer.add_array("t.arr_str", ["a", "", "ünï"])
    writer.add_array("t.arr_i32", [1, -2, 3])
    writer.add_array("t.arr_f32", [0.5, -1.25])
    writer.add_array("t.arr_bool", [True, False, True])
    writer.add_array("t.nested", [[1, 2], [3, 4, 5]])
    writer.add_uint32("general.alignment", 64)
    writer.add_tensor("t.tensor", np.arange(12, dtype=np.float32).reshape(3, 4))
    writer.add_tensor("t.scalar_row", np.array([7.0], dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    data = bytearray(path.read_bytes())
    data[4:8] = (2).to_bytes(4, "little")
    (OUT / "value_types_v2.gguf").write_bytes(bytes(data))

    reader = gguf.GGUFReader(path)
    golden = {
        "tools": TOOLS,
        "version": int(reader.fields["GGUF.version"].contents()),
        "alignment": int(reader.alignment),
        "data_offset": int(reader.data_offset),
        "metadata": [field_json(f) for n, f in reader.fields.items() if not n.startswith("GGUF.")],
        "tensors": [{
            "name": t.name, "type": t.tensor_type.name, "dims": [int(d) for d in t.shape],
            "file_offset": int(t.data_offset), "values": floats(t.data),
        } for t in reader.tensors],
    }
    (OUT / "value_types.json").write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")


def ggml_types_golden() -> None:
    types = {t.name: [t.value, *gguf.GGML_QUANT_SIZES[t]] for t in Q}
    (OUT / "ggml_types.json").write_text(json.dumps({"tools": TOOLS, "types": types}, indent=1) + "\n")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    ggml_types_golden()
    value_types_golden()
    quants_golden()
    smollm2_golden()


if __name__ == "__main__":
    main()
