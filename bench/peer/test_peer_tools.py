#!/usr/bin/env python3
"""Tests of the peer-benchmark helpers: make_1b_ggufs.py, machine.py and report.py.

    .venv/bin/python -m unittest bench/peer/test_peer_tools.py

The model writer runs on a tiny shape (the real one is 2 GB); the weight-byte count is checked
against the figure docs/perf/cpu.md derived by hand for the SmolLM2 file (skipped without it).
"""
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout
from unittest import mock

import numpy

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, HERE)

import machine  # noqa: E402
import make_1b_ggufs  # noqa: E402
import report  # noqa: E402

SMOLLM2 = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


class MakeModelTest(unittest.TestCase):
    TINY = dict(make_1b_ggufs.SHAPE, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16,
                intermediate=96)

    def test_plan_counts_the_llama_parameters(self):
        with mock.patch.dict(make_1b_ggufs.SHAPE, self.TINY):
            plan = make_1b_ggufs.tensor_plan(vocab=100)
        h, q, kv, ff = 64, 4 * 16, 2 * 16, 96
        per_layer = h * q + 2 * h * kv + q * h + 3 * h * ff + 2 * h
        total = sum(int(numpy.prod(s)) for _, s in plan)
        self.assertEqual(total, 100 * h + 2 * per_layer + h)
        self.assertNotIn("output.weight", [n for n, _ in plan])  # tied embeddings

    @unittest.skipUnless(os.path.exists(SMOLLM2), "needs models/ (scripts/setup.sh)")
    def test_writes_reads_back_and_reuses(self):
        gguf = make_1b_ggufs.gguf
        with tempfile.TemporaryDirectory() as tmp, \
                mock.patch.dict(make_1b_ggufs.SHAPE, self.TINY):
            out = os.path.join(tmp, "tiny.F16.gguf")
            make_1b_ggufs.write_model(out, SMOLLM2, seed=7)
            reader = gguf.GGUFReader(out)
            tensors = {t.name: t for t in reader.tensors}
            self.assertEqual(list(tensors["blk.1.ffn_down.weight"].shape), [96, 64])  # ne order
            self.assertEqual(list(tensors["blk.0.attn_k.weight"].shape), [64, 32])
            w = tensors["blk.0.ffn_up.weight"].data.astype("float32")
            self.assertAlmostEqual(float(w.std()), 0.02, delta=0.002)
            self.assertTrue((tensors["output_norm.weight"].data == 1.0).all())
            self.assertEqual(len(reader.fields["tokenizer.ggml.tokens"].data), 49152)
            self.assertEqual(reader.fields["llama.rope.freq_base"].contents(), 500000.0)
            first = read_bytes(out)
            mtime = os.stat(out).st_mtime_ns
            make_1b_ggufs.write_model(out, SMOLLM2, seed=7)  # same inputs: reused as is
            self.assertEqual(os.stat(out).st_mtime_ns, mtime)
            make_1b_ggufs.write_model(out, SMOLLM2, seed=8)  # another seed: rewritten
            self.assertNotEqual(read_bytes(out), first)

    @unittest.skipUnless(os.path.exists(SMOLLM2), "needs models/ (scripts/setup.sh)")
    def test_weight_bytes_match_the_hand_count(self):
        # docs/perf/cpu.md: 30 Q4_1 layers, F32 norms and the Q8_0 embedding as the LM head.
        got = make_1b_ggufs.weight_bytes(SMOLLM2)
        self.assertEqual(got["bytes_per_token"], 96_576_768)
        self.assertEqual(got["lm_head_type"], "Q8_0")


class MachineTest(unittest.TestCase):
    def test_isa_levels(self):
        base = {"avx2", "fma", "f16c"}
        self.assertEqual(machine.isa_level({"sse2"}), "below AVX2")
        self.assertEqual(machine.isa_level(base), "AVX2 only")
        self.assertEqual(machine.isa_level(base | {"avx_vnni"}), "AVX2 only (+ AVX-VNNI)")
        self.assertEqual(machine.isa_level(base | {"avx512f"}), "AVX2 only")  # no BW: as Pagoda
        self.assertEqual(machine.isa_level(base | {"avx512f", "avx512bw"}), "AVX-512")
        self.assertEqual(machine.isa_level(base | {"avx512f", "avx512bw", "avx512_vnni"}),
                         "AVX-512 + VNNI")

    def test_caps_follow_cpu_features(self):
        self.assertEqual(machine.pagoda_kernels("AVX-512 + VNNI", "avx2"), "AVX2")
        self.assertEqual(machine.pagoda_kernels("AVX-512 + VNNI", "avx512"), "AVX-512")
        self.assertEqual(machine.pagoda_kernels("AVX2 only", "avx512"), "AVX2")  # caps never raise
        self.assertEqual(machine.pagoda_kernels("AVX-512", ""), "AVX-512")


class ReportTest(unittest.TestCase):
    def test_medians_and_paired_ratios(self):
        rows = [("llama.cpp", 10.0, 1), ("pagoda", 30.0, 1), ("llama.cpp", 20.0, 2),
                ("pagoda", 20.0, 2), ("llama.cpp", 40.0, 3), ("pagoda", 10.0, 3)]
        with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as f:
            for engine, tps, r in rows:
                f.write(f"{engine}\tdecode\t1\t{r}\t{tps}\t0\tm.gguf\n")
        samples, _, order = report.load(f.name)
        os.unlink(f.name)
        table, medians = report.ratio_table(samples, order, {"m.gguf": "M"})
        self.assertEqual(medians[("m.gguf", "decode", 1)], (20.0, 20.0))
        self.assertIn("| M | decode tg128 | 1 |", table)
        self.assertIn("**1.00** | 3.00, 1.00, 0.25 |", table)
        extra = {"weight_bytes": {"m.gguf": {"bytes_per_token": 5e8}},
                 "bandwidth": {"runs": [{"when": "before", "by_threads": {
                     "1": {"best_gbps": 20.0}}}, {"when": "after", "by_threads": {
                         "1": {"best_gbps": 25.0}}}]}}
        bw = report.bandwidth_table(extra, medians, order, {"m.gguf": "M"})
        self.assertIn("| M | 500.0 MB | 1 | 25.0 | 10.0 (0.40) | 10.0 (0.40) |", bw)

    def test_section_is_replaced_not_duplicated(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "results.tsv"), "w") as f:
                f.write("llama.cpp\tprefill\t2\t1\t50\t512\tm.gguf\n"
                        "pagoda\tprefill\t2\t1\t75\t512\tm.gguf\n")
            env = {"DOC": "", "VERSION": "v", "LLAMA_COMMIT": "c", "LOAD_START": "1",
                   "LOAD_END": "2", "PAGODA_REV": "r", "ROUNDS": "1", "SECTION": "sec",
                   "TITLE": "T", "DATE": "d", "MACHINE_JSON": json.dumps({
                       "cpu_model": "cpu", "nproc": 2, "isa": "AVX2 only", "isa_flags": [],
                       "pagoda_cpu_isa_env": None, "pagoda_kernels": "AVX2",
                       "pagoda_int16_env": None}), "PAGODA_REL": "p", "LLAMA_ISA": "avx2",
                   "CMD": "cmd", "FLAGS": "f", "LLAMA_BENCH_REL": "b"}
            with open(os.path.join(tmp, "report_env.json"), "w") as f:
                json.dump(env, f)
            doc = os.path.join(tmp, "doc.md")
            with open(doc, "w") as f:
                f.write("# D\n\nhand-written\n")
            for _ in range(2):
                with mock.patch.object(sys, "argv", ["report.py", "--from", tmp, "--doc", doc]), \
                        redirect_stdout(io.StringIO()), mock.patch("sys.stderr", io.StringIO()):
                    report.main()
            with open(doc) as f:
                text = f.read()
            self.assertEqual(text.count("<!-- sec:begin"), 1)
            self.assertEqual(text.count("## T"), 1)
            self.assertIn("hand-written", text)
            self.assertIn("ISA **AVX2 only**", text)
            self.assertIn("**1.50**", text)


if __name__ == "__main__":
    unittest.main()
