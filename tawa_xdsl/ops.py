"""Attention, matmul and fp8 scaled matmul as PyTorch custom ops: `torch.ops.tawa.*`.

    import tawa_xdsl.ops as ops
    o = ops.attention(q, k, v, causal=True)          # [B, H, S, D]; K/V may have fewer heads
    c = ops.matmul(a, b, bias=bias, activation="gelu")
    c = ops.scaled_mm(a8, b8, scale_a, scale_b, out_dtype=torch.bfloat16)

Each is a `torch.library` custom op with a fake (meta) implementation, so `torch.compile`
(fullgraph=True) traces through it without a graph break. On CUDA tensors the op compiles the
kernel once per configuration (disk-cached, `tawa_xdsl.compiler.compile_cached`), picks the config
per shape with `autotune` on the first call (winners cached on disk), and launches on torch's
current stream with the tensors in place. On CPU tensors it runs the same tile program in the
interpreter (slow; for tests and debugging).

The kernels are the library's (`tawa_xdsl.kernels.gemm`, `tawa_xdsl.kernels.attention`),
reached through one adapter function each (`gemm_module`, `gemm_configs`, `attention_module`).
The GEMM's epilogue (in f32, before C is rounded) multiplies by the f32 scale vectors of
`scaled_mm` (per row of C, per column), adds the bias vector of `matmul` (M elements: one per
row, or N: one per column) and applies the activation; attention with fewer K/V heads (GQA)
reads K/V head h // group in the kernel. Inputs are used as they are when contiguous (b as a
transposed view of an [N, K] tensor), and the prepared launches (tensor maps, parameter
buffers) are cached per address and shape (`runtime.dispatch.LaunchCache`). A call whose
shape was seen goes straight to its tuned program (`GEMM_CHOICES`), so the host work per call
is the checks, the output's allocation and one launch-cache lookup. What torch does around
the kernel: a per-tensor fp8 scale is folded into the other operand's scale vector (one
elementwise kernel of M or N elements, made once while the scale tensors are unchanged:
`cached_scale_vectors`; none when both scales are vectors), and a bias of another shape
([M, N]) or type is added after the kernel.

This module imports without torch; calling an op without it raises ModuleNotFoundError.
"""

import functools
import math
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from tawa_xdsl import cdiv

try:
    import torch
    from torch import Tensor
except ModuleNotFoundError:  # the ops say what is missing when called
    torch = None
    Tensor = Any

MISSING_TORCH = "tawa_xdsl.ops needs PyTorch: pip install 'tawa-xdsl[torch]'"
ACTIVATIONS = ("relu", "gelu", "silu")


# ---------------------------------------------------------------------- kernel adapters


@dataclass(frozen=True)
class GemmForm:
    """What a GEMM program is specialized on besides its config: the element types of A/B and
    C, and its epilogue (a bias vector's type and axis, f32 scale vectors, the activation)."""

    dtype: str
    out_dtype: str
    bias_dtype: str | None = None
    bias_rows: bool = False  # the bias has M elements (one per row of C), else N
    row_scale: bool = False
    col_scale: bool = False
    activation: str | None = None


def gemm_module(config: Any, form: GemmForm) -> Any:
    """The tile module of C = act(A @ B^T * row_scale * col_scale + bias) (A [M, K], B [N, K])
    for one autotune config; its vectors follow (a, b, c, m, n, k) as
    `kernels.gemm.epilogue_arguments` orders them."""
    import tawa_xdsl.language as tl
    from tawa_xdsl.kernels.gemm import config_tile_ir

    bias = None if form.bias_dtype is None else TL_TYPES[form.bias_dtype](tl)
    return config_tile_ir(
        config, TL_TYPES[form.dtype](tl), TL_TYPES[form.out_dtype](tl), bias, form.activation,
        bias_rows=form.bias_rows, row_scale=form.row_scale, col_scale=form.col_scale,
    )  # fmt: skip


def gemm_configs(dtype: str) -> list[Any]:
    """The autotune configs of the GEMM for inputs of `dtype`."""
    import tawa_xdsl.language as tl
    from tawa_xdsl.kernels.gemm import configs_for

    return configs_for(TL_TYPES[dtype](tl))


def attention_module(
    head_dim: int, dtype: str, causal: bool, return_lse: bool, group: int = 1,
    form: tuple[int, bool] | None = None,
) -> Any:  # fmt: skip
    """(tile module, CompileOptions) of the attention forward over [B*H, S, D] tensors (K, V
    [B*H/group, S, D]), with the options `kernels.attention.compile_attention` uses by default
    (`attention.compile_options`: the rotated software pipeline among them), in `form` (query
    rows per program, persistent; None: `attention.default_form` without the length)."""
    from tawa_xdsl.kernels import attention

    block_m, persistent = form or attention.default_form(head_dim, causal)
    block_n = attention.default_block_n(head_dim)
    short = {"float16": "f16", "bfloat16": "bf16"}[dtype]
    module = attention.tile_module(
        head_dim, short, causal, block_n, return_lse, block_m=block_m, group=group
    )
    options = attention.compile_options(
        head_dim, persistent=persistent, block_m=block_m, causal=causal
    )
    return module, options


TL_TYPES = {
    "float32": lambda tl: tl.float32,
    "float16": lambda tl: tl.float16,
    "bfloat16": lambda tl: tl.bfloat16,
    "float8_e4m3fn": lambda tl: tl.float8e4nv,
    "float8_e5m2": lambda tl: tl.float8e5,
}


# ------------------------------------------------------------------------ running kernels


class Program:
    """A tile module and its compile options; its PTX kernel (disk-cached,
    `compiler.compile_cached`) and its prepared launches (by grid, stream and tensor addresses
    and layouts, `runtime.dispatch.LaunchCache`) are made on first GPU use."""

    def __init__(self, module: Any, options: Any):
        self.module, self.options = module, options
        self.kernel: Any = None
        self.launches: Any = None

    def gpu_kernel(self) -> Any:
        """The PTX kernel (compiled once)."""
        if self.kernel is None:
            from tawa_xdsl.compiler import compile_cached

            self.kernel = compile_cached(self.module, self.options)
        return self.kernel

    def run(self, grid: tuple[int, ...], args: list[Any]) -> None:
        """Launch: on the GPU for CUDA tensors (in place, torch's current stream), else in
        the tile interpreter over the CPU tensors (in place)."""
        if 0 in grid:
            return  # an empty output: no programs to run
        first = args[0]  # every op's first argument is a tensor, on the device of the rest
        if first.is_cuda:
            if self.launches is None:
                from tawa_xdsl.runtime.dispatch import LaunchCache

                self.launches = LaunchCache(self.gpu_kernel())
            self.launches.launch(grid, args, stream_reader(first.get_device())())
            return
        from tawa_xdsl.descriptor import TensorDescriptor
        from tawa_xdsl.interp.tile import run_kernel
        from tawa_xdsl.runtime.dispatch import host_descriptor

        blocks = iter(descriptor_blocks(self.module))
        staged = [
            host_descriptor(TensorDescriptor.from_tensor(a, next(blocks)))
            if isinstance(a, torch.Tensor)
            else a
            for a in args
        ]
        run_kernel(self.module, grid, staged)


@functools.cache
def gemm_program(config: Any, form: GemmForm) -> Program:
    return Program(gemm_module(config, form), config.compile_options)


@functools.cache
def attention_program(
    head_dim: int, dtype: str, causal: bool, return_lse: bool, group: int = 1,
    form: tuple[int, bool] | None = None,
) -> Program:  # fmt: skip
    return Program(*attention_module(head_dim, dtype, causal, return_lse, group, form))


@functools.cache
def stream_reader(device: int) -> Any:
    """How to read torch's current stream on CUDA device `device` (bound once per device)."""
    from tawa_xdsl.runtime.dispatch import torch_stream_reader

    return torch_stream_reader(device)


def descriptor_blocks(module: Any) -> list[tuple[int, ...]]:
    """The block shape of every descriptor parameter of the module's kernel, in order."""
    from xdsl.dialects import func

    from tawa_xdsl.dialects.tile import DescType

    kernel = next(op for op in module.ops if isinstance(op, func.FuncOp))
    return [
        tuple(arg.type.get_block_shape())
        for arg in kernel.body.block.args
        if isinstance(arg.type, DescType)
    ]


def dtype_of(tensor: Any) -> str:
    return str(tensor.dtype).removeprefix("torch.")


# --------------------------------------------------------------------------------- GEMM


@functools.cache
def gemm_tuner(dtype: str) -> Any:
    from tawa_xdsl.autotune import Autotuner

    return Autotuner(gemm_kernel_launch, gemm_configs(dtype), key=[])


# The (program, grid) the autotuner chose for each GPU (M, N, K, GemmForm): a call whose shape
# was seen launches without asking the tuner (whose keys hash their configs as JSON text).
GEMM_CHOICES: dict[tuple[int, int, int, GemmForm], tuple[Program, tuple[int, int, int]]] = {}


def gemm_kernel_launch(a: Any, b_nk: Any, c: Any, form: GemmForm, vectors: list[Any]) -> None:
    """C = epilogue(A @ B^T) on contiguous [M, K], [N, K] and [M, N] tensors, with the
    epilogue's vectors of `form` (in `epilogue_arguments` order), the config autotuned per
    shape on the GPU (the first config in the interpreter)."""
    (m, k), n = a.shape, b_nk.shape[0]
    args = [a, b_nk, c, m, n, k, *vectors]
    key = (m, n, k, form)
    choice = GEMM_CHOICES.get(key) if a.is_cuda else None
    if choice is None:
        choice = gemm_choice(key, args)
    program, grid = choice
    program.run(grid, args)


def gemm_choice(
    key: tuple[int, int, int, GemmForm], args: list[Any]
) -> tuple[Program, tuple[int, int, int]]:
    """The program and grid of a GEMM shape: autotuned on the GPU (remembered in
    `GEMM_CHOICES`), the first config in the interpreter."""
    m, n, _, form = key

    def chosen(config: Any) -> tuple[Program, tuple[int, int, int]]:
        grid = (cdiv(m, config.kwargs["BLOCK_M"]) * cdiv(n, config.kwargs["BLOCK_N"]), 1, 1)
        return gemm_program(config, form), grid

    tuner = gemm_tuner(form.dtype)
    if not args[0].is_cuda:
        return chosen(tuner.configs[0])

    def launcher(config: Any) -> Any:
        program, grid = chosen(config)
        return lambda: program.run(grid, args)

    choice = GEMM_CHOICES[key] = chosen(tuner.tune(key, launcher))
    return choice


def check_matrices(name: str, a: Any, b: Any, dtypes: tuple[str, ...]) -> None:
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(
            f"tawa.{name}: expected a [M, K] and b [K, N], got {list(a.shape)} and {list(b.shape)}"
        )
    if dtype_of(a) not in dtypes or dtype_of(b) != dtype_of(a):
        raise TypeError(
            f"tawa.{name}: a and b must be one of {', '.join(dtypes)}, "
            f"got {dtype_of(a)} and {dtype_of(b)}"
        )


def k_major(b: Any) -> Any:
    """[K, N] b as the [N, K] row-major tensor the kernel reads (free when b is a transposed
    view of one, as torch._scaled_mm's column-major b)."""
    bt = b.t()
    return bt if bt.is_contiguous() else bt.contiguous()


def vector_operand(vector: Any) -> Any:
    """A 1-D tensor as the TMA reads it: contiguous and 16-byte aligned (copied if not)."""
    if vector.stride(0) != 1 or vector.data_ptr() % 16:
        vector = vector.clone()
    return vector


def bias_vector(bias: Any, m: int, n: int) -> tuple[Any, bool]:
    """(`bias` as the vector the GEMM epilogue adds, whether it runs along the rows), or (None,
    False) for a bias the kernel does not read (another shape or type: torch adds it). N
    elements ([N], [1, N]) are one per column, as torch broadcasts them (also when M = N); M
    elements ([M], [M, 1]) one per row."""
    if bias is None or dtype_of(bias) not in ("float16", "bfloat16", "float32"):
        return None, False
    shape = tuple(bias.shape)
    if shape in ((n,), (1, n)):
        return vector_operand(bias.reshape(n)), False
    if shape in ((m,), (m, 1)):
        return vector_operand(bias.reshape(m)), True
    return None, False


def epilogue(c: Any, bias: Any, activation: str | None) -> Any:
    """The bias and activation by torch, for a bias the kernel does not read."""
    if bias is not None:
        c = c + bias.to(c.dtype)
    if activation == "relu":
        c = torch.relu(c)
    elif activation == "gelu":  # the tanh form, as the kernel's
        c = torch.nn.functional.gelu(c, approximate="tanh")
    elif activation == "silu":
        c = torch.nn.functional.silu(c)
    return c


def check_activation(activation: str | None) -> None:
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(
            f"tawa.matmul: activation must be None or one of {', '.join(ACTIVATIONS)}, "
            f"got {activation!r}"
        )


def out_dtype_name(out_dtype: Any, default: str) -> str:
    name = default if out_dtype is None else str(out_dtype).removeprefix("torch.")
    if name not in ("float16", "bfloat16"):
        raise TypeError(f"tawa ops write float16 or bfloat16, got out_dtype={name}")
    return name


def matmul_impl(
    a: Any, b: Any, bias: Any = None, activation: str | None = None, out_dtype: Any = None
) -> Any:
    check_matrices("matmul", a, b, ("float16", "bfloat16"))
    check_activation(activation)
    m, n = a.shape[0], b.shape[1]
    out = out_dtype_name(out_dtype, dtype_of(a))
    c = a.new_empty((m, n), dtype=getattr(torch, out))
    vector, rows = bias_vector(bias, m, n)
    if bias is not None and vector is None:
        gemm_kernel_launch(a.contiguous(), k_major(b), c, GemmForm(dtype_of(a), out), [])
        return epilogue(c, bias, activation)
    bias_dtype = None if vector is None else dtype_of(vector)
    form = GemmForm(dtype_of(a), out, bias_dtype, rows, activation=activation)
    vectors = [] if vector is None else [vector]
    gemm_kernel_launch(a.contiguous(), k_major(b), c, form, vectors)
    return c


def matmul_fake(
    a: Any, b: Any, bias: Any = None, activation: str | None = None, out_dtype: Any = None
) -> Any:
    check_matrices("matmul", a, b, ("float16", "bfloat16"))
    check_activation(activation)
    out = out_dtype_name(out_dtype, dtype_of(a))
    return a.new_empty(a.shape[0], b.shape[1], dtype=getattr(torch, out))


def scale_kind(scale: Any, rows: int, cols: int, which: str) -> str:
    """ "tensor" ([] or one element), "rows" ([M, 1], or [M] for scale_a) or "cols" ([1, N],
    or [N] for scale_b): what an fp8 scale multiplies; ValueError in one line otherwise."""
    shape = tuple(scale.shape)
    if scale.numel() == 1:
        return "tensor"
    if shape == (rows, 1) or (which == "scale_a" and shape == (rows,)):
        return "rows"
    if shape == (1, cols) or (which == "scale_b" and shape == (cols,)):
        return "cols"
    vector = f"[{rows}]" if which == "scale_a" else f"[{cols}]"
    raise ValueError(
        f"tawa.scaled_mm: {which} must be per-tensor, {vector}, [{rows}, 1] or [1, {cols}], "
        f"got {list(shape)}"
    )


def scale_vectors(scale_a: Any, scale_b: Any, m: int, n: int) -> tuple[Any, Any]:
    """(row scale [M] or None, column scale [N] or None), f32, whose product is scale_a *
    scale_b: vectors as they are, per-tensor scales folded into a vector by one elementwise
    product (into the column vector when there is one; both per-tensor: an [N] vector)."""
    factors: dict[str, list[Any]] = {"tensor": [], "rows": [], "cols": []}
    for scale, which in ((scale_a, "scale_a"), (scale_b, "scale_b")):
        kind = scale_kind(scale, m, n, which)
        length = {"tensor": 1, "rows": m, "cols": n}[kind]
        factors[kind].append(scale.reshape(length).float())
    rows, cols = factors["rows"], factors["cols"]
    if not rows and not cols:
        cols = [factors["tensor"].pop().expand(n)]
    (rows if rows and not cols else cols).extend(factors["tensor"])
    return product_vector(rows), product_vector(cols)


# The scale vectors of recent (scale_a, scale_b) pairs, so that a loop passing the same scales
# launches no elementwise kernel to fold a per-tensor scale: keyed by both tensors' identity,
# version counter and address, and checked against weak references (a freed tensor's id can
# come back). Like autograd, this does not see a write through `.data`.
SCALE_VECTORS: OrderedDict[tuple[Any, ...], tuple[Any, Any, Any, Any]] = OrderedDict()
SCALE_VECTORS_KEPT = 64


def cached_scale_vectors(scale_a: Any, scale_b: Any, m: int, n: int) -> tuple[Any, Any]:
    """`scale_vectors`, made once per pair of unchanged scale tensors (every call for
    inference-mode tensors, which keep no version counter)."""
    try:
        key = (id(scale_a), scale_a._version, scale_a.data_ptr(),
               id(scale_b), scale_b._version, scale_b.data_ptr(), m, n)  # fmt: skip
    except RuntimeError:
        return scale_vectors(scale_a, scale_b, m, n)
    entry = SCALE_VECTORS.get(key)
    if entry is not None and entry[0]() is scale_a and entry[1]() is scale_b:
        SCALE_VECTORS.move_to_end(key)
        return entry[2], entry[3]
    rows, cols = scale_vectors(scale_a, scale_b, m, n)
    SCALE_VECTORS[key] = (weakref.ref(scale_a), weakref.ref(scale_b), rows, cols)
    if len(SCALE_VECTORS) > SCALE_VECTORS_KEPT:
        SCALE_VECTORS.popitem(last=False)
    return rows, cols


def product_vector(factors: list[Any]) -> Any:
    """The elementwise product of 1-D f32 tensors (one broadcasting kernel), or None."""
    if not factors:
        return None
    vector = factors[0]
    for factor in factors[1:]:
        vector = vector * factor
    return vector_operand(vector.contiguous() if vector.stride(0) == 0 else vector)


def scaled_mm_impl(a: Any, b: Any, scale_a: Any, scale_b: Any, out_dtype: Any = None) -> Any:
    check_matrices("scaled_mm", a, b, ("float8_e4m3fn", "float8_e5m2"))
    m, n = a.shape[0], b.shape[1]
    row_scale, col_scale = cached_scale_vectors(scale_a, scale_b, m, n)
    out = out_dtype_name(out_dtype, "bfloat16")
    c = a.new_empty((m, n), dtype=getattr(torch, out))
    form = GemmForm(
        dtype_of(a), out, row_scale=row_scale is not None, col_scale=col_scale is not None
    )
    from tawa_xdsl.kernels.gemm import epilogue_arguments

    vectors = epilogue_arguments(row_scale=row_scale, col_scale=col_scale)
    gemm_kernel_launch(a.contiguous(), k_major(b), c, form, vectors)
    return c


def scaled_mm_fake(a: Any, b: Any, scale_a: Any, scale_b: Any, out_dtype: Any = None) -> Any:
    check_matrices("scaled_mm", a, b, ("float8_e4m3fn", "float8_e5m2"))
    for scale, which in ((scale_a, "scale_a"), (scale_b, "scale_b")):
        scale_kind(scale, a.shape[0], b.shape[1], which)
    out = out_dtype_name(out_dtype, "bfloat16")
    return a.new_empty(a.shape[0], b.shape[1], dtype=getattr(torch, out))


# ---------------------------------------------------------------------------- attention


def check_attention(q: Any, k: Any, v: Any) -> tuple[int, int, int, int]:
    if q.dim() != 4 or k.dim() != 4 or v.shape != k.shape:
        raise ValueError(
            f"tawa.attention: expected q [B, H, S, D] and k, v [B, H_kv, S, D], got "
            f"{list(q.shape)}, {list(k.shape)}, {list(v.shape)}"
        )
    batch, heads, seq, head_dim = q.shape
    if k.shape[0] != batch or k.shape[2:] != q.shape[2:] or heads % k.shape[1]:
        raise ValueError(
            f"tawa.attention: k/v {list(k.shape)} do not fit q {list(q.shape)} (same B, S, D; "
            "H a multiple of H_kv)"
        )
    if dtype_of(q) not in ("float16", "bfloat16") or not dtype_of(k) == dtype_of(v) == dtype_of(q):
        raise TypeError("tawa.attention: q, k, v must all be float16 or bfloat16")
    return batch, heads, seq, head_dim


def attention_impl(
    q: Any, k: Any, v: Any, causal: bool = False, scale: float | None = None,
    return_lse: bool = False,
) -> tuple[Any, Any]:  # fmt: skip
    batch, heads, seq, head_dim = check_attention(q, k, v)
    group = heads // k.shape[1]  # GQA: query heads per K/V head, read in place by the kernel
    rows = batch * heads
    q3 = q.reshape(rows, seq, head_dim).contiguous()
    k3, v3 = (t.reshape(rows // group, seq, head_dim).contiguous() for t in (k, v))
    o = torch.empty_like(q3)
    args = [q3, k3, v3, o]
    if return_lse:  # rows 16 bytes apart, as the TMA store needs
        lse = torch.empty(rows, cdiv(seq, 4) * 4, dtype=torch.float32, device=q.device)[:, :seq]
        args.append(lse)
    from tawa_xdsl.kernels.attention import default_form

    form = default_form(head_dim, bool(causal), seq)  # the rows and form for this length
    program = attention_program(head_dim, dtype_of(q), bool(causal), bool(return_lse), group, form)
    sm_scale = float(scale) if scale is not None else 1.0 / math.sqrt(head_dim)
    program.run((cdiv(seq, form[0]), rows, 1), [*args, seq, sm_scale])
    out = o.reshape(batch, heads, seq, head_dim)
    if return_lse:
        return out, lse.reshape(batch, heads, seq)
    return out, q.new_empty(0, dtype=torch.float32)


def attention_fake(
    q: Any, k: Any, v: Any, causal: bool = False, scale: float | None = None,
    return_lse: bool = False,
) -> tuple[Any, Any]:  # fmt: skip
    batch, heads, seq, _ = check_attention(q, k, v)
    lse_shape = (batch, heads, seq) if return_lse else (0,)
    return q.new_empty(q.shape), q.new_empty(lse_shape, dtype=torch.float32)


# --------------------------------------------------------------------- registration, API


def register() -> None:
    """Define `torch.ops.tawa.{attention, matmul, scaled_mm}` with their fake kernels."""
    library = torch.library

    def define(name: str, impl: Any, fake: Any, schema: str) -> None:
        library.define(f"tawa::{name}", schema)
        library.impl(f"tawa::{name}", ("CPU", "CUDA"), impl)
        library.register_fake(f"tawa::{name}", fake)

    define(
        "matmul", matmul_impl, matmul_fake,
        "(Tensor a, Tensor b, Tensor? bias=None, str? activation=None, "
        "ScalarType? out_dtype=None) -> Tensor",
    )  # fmt: skip
    define(
        "scaled_mm", scaled_mm_impl, scaled_mm_fake,
        "(Tensor a, Tensor b, Tensor scale_a, Tensor scale_b, ScalarType? out_dtype=None) "
        "-> Tensor",
    )  # fmt: skip
    define(
        "attention", attention_impl, attention_fake,
        "(Tensor q, Tensor k, Tensor v, bool causal=False, float? scale=None, "
        "bool return_lse=False) -> (Tensor, Tensor)",
    )  # fmt: skip


if torch is not None and not hasattr(torch.ops.tawa, "matmul"):
    register()


def require_torch() -> None:
    if torch is None:
        raise ModuleNotFoundError(MISSING_TORCH)


def attention(
    q: Any, k: Any, v: Any, *, causal: bool = False, scale: float | None = None,
    return_lse: bool = False,
) -> Any:  # fmt: skip
    """softmax(Q K^T * scale) V over [B, H, S, D] (K/V with H_kv | H heads: GQA); with
    `return_lse` also the natural-log log-sum-exp of each row, [B, H, S] fp32."""
    require_torch()
    o, lse = torch.ops.tawa.attention(q, k, v, causal, scale, return_lse)
    return (o, lse) if return_lse else o


def matmul(
    a: Any, b: Any, *, bias: Any = None, activation: str | None = None, out_dtype: Any = None
) -> Any:
    """activation(a @ b + bias) for f16/bf16 a [M, K], b [K, N]; "gelu" is its tanh form
    (`F.gelu(approximate="tanh")`). A bias of N elements ([N], [1, N]: per column) or M ([M],
    [M, 1]: per row) of f16, bf16 or f32 is added in the kernel's epilogue, [N] first when
    M = N; any other bias by torch after the kernel."""
    require_torch()
    return torch.ops.tawa.matmul(a, b, bias, activation, out_dtype)


def scaled_mm(a: Any, b: Any, scale_a: Any, scale_b: Any, *, out_dtype: Any = None) -> Any:
    """(a @ b) * scale_a * scale_b for fp8 a [M, K], b [K, N], in f32 in the kernel's epilogue
    before C is rounded to `out_dtype` (bf16 by default, or f16). Each scale is f32 per-tensor
    ([] or one element), per row ([M, 1], or [M] for scale_a) or per column ([1, N], or [N]
    for scale_b)."""
    require_torch()
    return torch.ops.tawa.scaled_mm(a, b, scale_a, scale_b, out_dtype)


__all__ = ["attention", "matmul", "register", "scaled_mm"]
