"""GPTQ and AWQ 4-bit packing and reference dequantization in numpy, written from the published
formats (AutoGPTQ / GPTQModel `QuantLinear.pack` and transformers' GPTQ docs; AutoAWQ
`WQLinear_GEMM.from_linear` and `awq.utils.packing_utils.dequantize_gemm`). torch-based reference
tools (gptqmodel, autoawq, compressed-tensors) were not installed: they need torch, which the CI
venv lacks. Packing and unpacking are written independently (pack: loops over nibble slots;
unpack: vectorized shifts, AWQ through its reverse order table), so a mistake in one direction
does not cancel out.

Shapes, for a linear layer with weight W [N, K] (out_features N, in_features K), G groups:
  GPTQ: qweight I32 [K/8, N] (packed along K), qzeros I32 [G, N/8], scales F16 [G, N],
        g_idx I32 [K]; v1 serialization stores zero - 1 in qzeros.
  AWQ:  qweight I32 [K, N/8] (packed along N, nibble i = channel AWQ_ORDER[i]),
        qzeros I32 [G, N/8] (same order), scales F16 [G, N]; no g_idx.
"""

import numpy as np

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
AWQ_REVERSE_ORDER = [0, 4, 1, 5, 2, 6, 3, 7]
SHIFTS = np.arange(0, 32, 4, dtype=np.uint32)


def _to_i32(u32):
    return np.ascontiguousarray(u32, dtype=np.uint32).view(np.int32)


def pack_gptq(q, zeros, scales, g_idx, v1=True):
    """q [K, N] ints 0..15, zeros [G, N] ints (0..16 when v1), scales [G, N] fp16."""
    k, n = q.shape
    qweight = np.zeros((k // 8, n), dtype=np.uint32)
    for j in range(8):
        qweight |= q[j::8, :].astype(np.uint32) << np.uint32(4 * j)
    stored = zeros - (1 if v1 else 0)
    assert stored.min() >= 0 and stored.max() <= 15
    qzeros = np.zeros((zeros.shape[0], n // 8), dtype=np.uint32)
    for j in range(8):
        qzeros |= stored[:, j::8].astype(np.uint32) << np.uint32(4 * j)
    return {"qweight": _to_i32(qweight), "qzeros": _to_i32(qzeros),
            "scales": scales.astype(np.float16), "g_idx": g_idx.astype(np.int32)}


def dequantize_gptq(t, v1=True):
    """-> W [N, K] float32, W[n, k] = scales[g, n] * (q[k, n] - zero[g, n]), g = g_idx[k]."""
    qweight = t["qweight"].view(np.uint32)
    qzeros = t["qzeros"].view(np.uint32)
    k8, n = qweight.shape
    q = ((qweight[:, None, :] >> SHIFTS[None, :, None]) & 15).reshape(k8 * 8, n)
    zeros = ((qzeros[:, :, None] >> SHIFTS[None, None, :]) & 15).reshape(qzeros.shape[0], n)
    zeros = zeros.astype(np.int64) + (1 if v1 else 0)
    g = t["g_idx"].astype(np.int64)
    scales = t["scales"].astype(np.float32)
    w = scales[g] * (q.astype(np.int64) - zeros[g]).astype(np.float32)
    return np.ascontiguousarray(w.T, dtype=np.float32)


def pack_awq(q, zeros, scales):
    """q [K, N] ints 0..15, zeros [G, N] ints 0..15, scales [G, N] fp16."""
    k, n = q.shape
    qweight = np.zeros((k, n // 8), dtype=np.uint32)
    qzeros = np.zeros((zeros.shape[0], n // 8), dtype=np.uint32)
    for i in range(8):
        qweight |= q[:, AWQ_ORDER[i]::8].astype(np.uint32) << np.uint32(4 * i)
        qzeros |= zeros[:, AWQ_ORDER[i]::8].astype(np.uint32) << np.uint32(4 * i)
    return {"qweight": _to_i32(qweight), "qzeros": _to_i32(qzeros),
            "scales": scales.astype(np.float16)}


def dequantize_awq(t, group_size):
    """-> W [N, K] float32 as AutoAWQ's dequantize_gemm computes it (in float32)."""
    qweight = t["qweight"].view(np.uint32)
    qzeros = t["qzeros"].view(np.uint32)
    k = qweight.shape[0]
    n = qweight.shape[1] * 8
    order = np.arange(n).reshape(-1, 8)[:, AWQ_REVERSE_ORDER].reshape(-1)
    q = ((qweight[:, :, None] >> SHIFTS[None, None, :]) & 15).reshape(k, n)[:, order]
    zeros = ((qzeros[:, :, None] >> SHIFTS[None, None, :]) & 15).reshape(-1, n)[:, order]
    g = np.arange(k) // group_size
    scales = t["scales"].astype(np.float32)
    w = (q.astype(np.int64) - zeros[g].astype(np.int64)).astype(np.float32) * scales[g]
    return np.ascontiguousarray(w.T, dtype=np.float32)


def rtn_quantize(w, group_size, sym, act_order_rng=None, min_zero=0):
    """Round-to-nearest 4-bit quantization of W [N, K] float32 with per-group scales (fp16) and
    zeros, in GPTQ's layout: returns q [K, N], zeros [G, N], scales [G, N], g_idx [K].
    With act_order_rng, input channels are assigned to groups in a random order (as GPTQ's
    desc_act does by Hessian diagonal), so g_idx is not monotonic. min_zero=1 keeps asymmetric
    zeros representable in GPTQ's v1 serialization (which stores zero - 1 in a nibble)."""
    n, k = w.shape
    gs = k if group_size == -1 else group_size
    num_groups = (k + gs - 1) // gs
    perm = np.arange(k) if act_order_rng is None else act_order_rng.permutation(k)
    g_idx = np.empty(k, dtype=np.int64)
    g_idx[perm] = np.arange(k) // gs
    scales = np.zeros((num_groups, n), dtype=np.float16)
    zeros = np.zeros((num_groups, n), dtype=np.int64)
    q = np.zeros((k, n), dtype=np.int64)
    for g in range(num_groups):
        cols = np.nonzero(g_idx == g)[0]
        block = w[:, cols]
        lo = np.minimum(block.min(axis=1), 0.0)
        hi = np.maximum(block.max(axis=1), 0.0)
        if sym:
            amax = np.maximum(np.abs(lo), np.abs(hi))
            scale = (2.0 * amax / 15.0).astype(np.float16)
            zero = np.full(n, 8, dtype=np.int64)
        else:
            scale = ((hi - lo) / 15.0).astype(np.float16)
        scale = np.where(scale > 0, scale, np.float16(1.0)).astype(np.float16)
        if not sym:
            zero = np.clip(np.rint(-lo / scale.astype(np.float32)), min_zero, 15).astype(np.int64)
        qq = np.rint(block / scale.astype(np.float32)[:, None]) + zero[:, None]
        q[cols, :] = np.clip(qq, 0, 15).astype(np.int64).T
        scales[g] = scale
        zeros[g] = zero
    return q, zeros, scales, g_idx
