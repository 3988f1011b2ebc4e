"""The fuzzer's kernels, written in `tawa_xdsl.language`: each program description
(`fuzz.programs`) picks one of them and sets its constexprs, and the frontend writes its tile
IR (`tile_module`).

* `fuzz_gemm`: C = epilogue(A @ B^T) (B stored N x K, or K x N with `B_N_MAJOR`), one K loop
  or two in sequence into one accumulator (`LOOPS`), optional split-K (`SPLIT_K` programs
  along grid axis 2, each storing its f32 partial P[s]), and up to four epilogue ops
  (`OP0`..`OP3`, `epilogue_op`), op i reading its run-time argument `x<i>` (a scalar or a
  row/column vector descriptor);
* `fuzz_rows`: a kernel with no dot: a copy of one tile, or a row softmax, layernorm or
  RMSnorm forward over rows of N <= BLOCK_N columns (columns past N masked).
"""

from __future__ import annotations

import tawa_xdsl
import tawa_xdsl.language as tl

LEAKY_ALPHA = 0.125


@tawa_xdsl.jit
def epilogue_op(x, arg, off_m, off_n, KIND: tl.constexpr, BLOCK_N: tl.constexpr):
    """One elementwise or row-reducing op of the epilogue on the f32 tile `x`; `arg` is its
    scalar, or its vector descriptor (rows: BLOCK_M elements at off_m, columns: BLOCK_N at
    off_n), or None."""
    if KIND == "scale":
        x = x * arg
    if KIND == "bias_scalar":
        x = x + arg
    if KIND == "bias":  # a bias per column
        x = x + arg.load([off_n]).to(tl.float32)[None, :]
    if KIND == "col_scale":
        x = x * arg.load([off_n]).to(tl.float32)[None, :]
    if KIND == "row_scale":
        x = x * arg.load([off_m]).to(tl.float32)[:, None]
    if KIND == "row_bias":
        x = x + arg.load([off_m]).to(tl.float32)[:, None]
    if KIND == "relu":
        x = tl.maximum(x, 0.0)
    if KIND == "exp2":
        x = tl.exp2(x)
    if KIND == "leaky":
        x = tl.where(x < 0.0, x * LEAKY_ALPHA, x)
    if KIND == "round_f16":
        x = x.to(tl.float16).to(tl.float32)
    if KIND == "round_bf16":
        x = x.to(tl.bfloat16).to(tl.float32)
    if KIND == "round_f16_bf16":  # f16 straight to bf16: one fragment_convert between them
        x = x.to(tl.float16).to(tl.bfloat16).to(tl.float32)
    if KIND == "sub_row_max":
        x = x - tl.max(x, axis=1)[:, None]
    if KIND == "sub_row_min":
        x = x - tl.min(x, axis=1)[:, None]
    if KIND == "sub_row_mean":
        x = x - (tl.sum(x, axis=1) * (1.0 / BLOCK_N))[:, None]
    return x


@tawa_xdsl.jit
def k_steps(acc, a_desc, b_desc, off_m, off_n, first, last,
            BLOCK_K: tl.constexpr, B_N_MAJOR: tl.constexpr):  # fmt: skip
    """acc + the A @ B^T products of K tiles first .. last - 1."""
    for kt in tl.range(first, last):
        off_k = kt * BLOCK_K
        a = a_desc.load([off_m, off_k])
        if B_N_MAJOR:
            acc = tl.dot(a, b_desc.load([off_k, off_n]), acc)
        else:
            acc = tl.dot(a, b_desc.load([off_n, off_k]).T, acc)
    return acc


@tawa_xdsl.jit
def fuzz_gemm(
    a_desc, b_desc, c_desc, m, n, k, x0=None, x1=None, x2=None, x3=None,
    BLOCK_M: tl.constexpr = 128, BLOCK_N: tl.constexpr = 128, BLOCK_K: tl.constexpr = 64,
    GRID_2D: tl.constexpr = False, B_N_MAJOR: tl.constexpr = False,
    SPLIT_K: tl.constexpr = 1, LOOPS: tl.constexpr = 1,
    OP0: tl.constexpr = None, OP1: tl.constexpr = None, OP2: tl.constexpr = None,
    OP3: tl.constexpr = None,
):  # fmt: skip
    split = 0
    if SPLIT_K > 1:  # grid (tiles of M, tiles of N, splits of K)
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        split = tl.program_id(2)
    elif GRID_2D:
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
    else:
        pid = tl.program_id(0)
        tiles_n = tl.cdiv(n, BLOCK_N)
        pid_m = pid // tiles_n
        pid_n = pid % tiles_n
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    k_tiles = tl.cdiv(k, BLOCK_K)
    first = 0
    last = k_tiles
    if SPLIT_K > 1:
        per_split = tl.cdiv(k_tiles, SPLIT_K)
        first = split * per_split
        last = tl.minimum(first + per_split, k_tiles)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if LOOPS == 2:  # the K tiles in two loops, one after the other, into one accumulator
        middle = first + (last - first) // 2
        acc = k_steps(acc, a_desc, b_desc, off_m, off_n, first, middle, BLOCK_K, B_N_MAJOR)
        acc = k_steps(acc, a_desc, b_desc, off_m, off_n, middle, last, BLOCK_K, B_N_MAJOR)
    else:
        acc = k_steps(acc, a_desc, b_desc, off_m, off_n, first, last, BLOCK_K, B_N_MAJOR)
    if OP0 is not None:
        acc = epilogue_op(acc, x0, off_m, off_n, OP0, BLOCK_N)
    if OP1 is not None:
        acc = epilogue_op(acc, x1, off_m, off_n, OP1, BLOCK_N)
    if OP2 is not None:
        acc = epilogue_op(acc, x2, off_m, off_n, OP2, BLOCK_N)
    if OP3 is not None:
        acc = epilogue_op(acc, x3, off_m, off_n, OP3, BLOCK_N)
    out = acc.to(c_desc.dtype)
    if SPLIT_K > 1:
        c_desc.store([split, off_m, off_n], out.reshape([1, BLOCK_M, BLOCK_N]))
    else:
        c_desc.store([off_m, off_n], out)


@tawa_xdsl.jit
def fuzz_rows(
    x_desc, y_desc, m, n, w_desc=None, b_desc=None, eps=None,
    OP: tl.constexpr = "copy", BLOCK_M: tl.constexpr = 128, BLOCK_N: tl.constexpr = 64,
):  # fmt: skip
    off_m = tl.program_id(0) * BLOCK_M
    if OP == "copy":  # grid (tiles of M, tiles of N)
        off_n = tl.program_id(1) * BLOCK_N
        y_desc.store([off_m, off_n], x_desc.load([off_m, off_n]).to(y_desc.dtype))
    else:  # one program per BLOCK_M whole rows of n <= BLOCK_N columns
        x = x_desc.load([off_m, 0]).to(tl.float32)
        inside = tl.arange(0, BLOCK_N)[None, :] < n
        width = n.to(tl.float32)
        if OP == "softmax":
            x = tl.where(inside, x, float("-inf"))
            num = tl.exp(x - tl.max(x, axis=1)[:, None])
            y = num / tl.sum(num, axis=1)[:, None]
        if OP == "layernorm":
            mean = tl.sum(x, axis=1) / width
            xc = tl.where(inside, x - mean[:, None], 0.0)
            var = tl.sum(xc * xc, axis=1) / width
            y = xc * tl.rsqrt(var + eps)[:, None]
            y = y * w_desc.load([0]).to(tl.float32)[None, :]
            y = y + b_desc.load([0]).to(tl.float32)[None, :]
        if OP == "rmsnorm":
            y = x * tl.rsqrt(tl.sum(x * x, axis=1) / width + eps)[:, None]
            y = y * w_desc.load([0]).to(tl.float32)[None, :]
        y_desc.store([off_m, 0], y.to(y_desc.dtype))
