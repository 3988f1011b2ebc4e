"""Launch plumbing that needs no GPU: PTX signatures, argument packing, array description,
and launching a compiled kernel (parameters from its arguments, staging, empty grids)."""

import ctypes
import importlib
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tawa_xdsl.compiler import CompiledKernel, CompileOptions, compile_to_ptx
from tawa_xdsl.descriptor import TensorDescriptor
from tawa_xdsl.diagnostics import parse_file
from tawa_xdsl.dialects import make_context
from tawa_xdsl.runtime.dtypes import dtype_name, expect_dtype
from tawa_xdsl.runtime.errors import DTypeMismatchError, LaunchError
from tawa_xdsl.runtime.launch import (
    LaunchConfig,
    dim3,
    empty_tensor_stand_in,
    pack_parameters,
    param_value,
)
from tawa_xdsl.runtime.memory import describe
from tawa_xdsl.runtime.module import Kernel, Param, parse_entries, ptx_bytes
from tawa_xdsl.runtime.tensormap import Swizzle, TensorMap, TensorMapSpec, aligned_descriptor_buffer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# The module itself: the package's `launch` attribute is the function of that name.
launch_module = importlib.import_module("tawa_xdsl.runtime.launch")
tensormap_module = importlib.import_module("tawa_xdsl.runtime.tensormap")

WS_GEMM_SIGNATURE = """
.visible .entry ws_gemm_bf16(
    .param .align 64 .b8 tmA[128],   // A map
    .param .align 64 .b8 tmB[128],
    .param .u64 pC,
    .param .u32 K,
    .param .u32 N
)
.maxntid 384, 1, 1
{ ret; }
.entry scale(.param .f32 alpha, .param .s32 n, .param .u64 .ptr .global .align 16 out) { ret; }
"""


def test_parse_entries_reads_every_signature() -> None:
    entries = parse_entries(WS_GEMM_SIGNATURE)
    assert [str(p) for p in entries["ws_gemm_bf16"]] == [
        ".b8 tmA[128]",
        ".b8 tmB[128]",
        ".u64 pC",
        ".u32 K",
        ".u32 N",
    ]
    assert entries["scale"] == (Param("alpha", "f", 32), Param("n", "s", 32), Param("out", "u", 64))


def test_signature_of_emitted_ptx_matches_the_kernel_params() -> None:
    """The loader reads back, from PTX this compiler printed, the params the launch packs."""
    from tawa_xdsl.compiler import CompileOptions, compile_to_ptx
    from tawa_xdsl.diagnostics import parse_file
    from tawa_xdsl.dialects import make_context

    gemm = Path(__file__).resolve().parents[2] / "examples" / "gemm.mlir"
    kernel = compile_to_ptx(parse_file(make_context(), gemm), CompileOptions(verify=False))
    params = parse_entries(kernel.ptx)[kernel.name]
    assert [p.name for p in params] == [p.name for p in kernel.params]
    sizes = {"tensormap": 128, "ptr": 8}
    assert [p.nbytes for p in params] == [sizes.get(p.field, 4) for p in kernel.params]


def test_ptx_bytes_is_nul_terminated_ascii() -> None:
    assert ptx_bytes(".version 8.0") == b".version 8.0\0"
    with pytest.raises(UnicodeEncodeError):
        ptx_bytes("// caf\u00e9")


def fake_kernel(source: str = WS_GEMM_SIGNATURE, name: str = "ws_gemm_bf16") -> Kernel:
    return Kernel(name, None, None, parse_entries(source)[name])  # type: ignore[arg-type] - no GPU


def fake_tensor_map() -> TensorMap:
    spec = TensorMapSpec(0x1000, "bfloat16", (128, 64), (64, 1), (128, 64), Swizzle.B128)
    buffer = aligned_descriptor_buffer()
    buffer[:] = np.arange(128, dtype=np.uint8)
    return TensorMap(spec, buffer)


class CudaArray:
    """Any object with `__cuda_array_interface__` (a CuPy array, say)."""

    def __init__(self, pointer: int, shape: tuple[int, ...], typestr: str, strides=None):
        self.__cuda_array_interface__ = {
            "data": (pointer, False),
            "shape": shape,
            "typestr": typestr,
            "strides": strides,
            "version": 3,
        }


def test_pack_ws_gemm_arguments() -> None:
    """One buffer: the maps' bytes at 128-aligned addresses, then the pointer and the ints,
    each where the pointer array says."""
    tm = fake_tensor_map()
    c = CudaArray(0xABC000, (256, 256), "<f4")
    packed = pack_parameters(fake_kernel(), [tm, tm, c, 4096, 8192])
    assert packed.param_bytes(0) == packed.param_bytes(1) == tm.to_bytes() == bytes(range(128))
    assert packed.param_bytes(2) == (0xABC000).to_bytes(8, "little")
    assert packed.param_bytes(3) == (4096).to_bytes(4, "little")
    assert packed.param_bytes(4) == (8192).to_bytes(4, "little")
    pointers = [packed.pointers[i] for i in range(5)]
    assert pointers[0] % 128 == 0 and pointers[1] == pointers[0] + 128
    for index, pointer in enumerate(pointers):
        size = fake_kernel().params[index].nbytes  # type: ignore[index] - params parsed
        assert ctypes.string_at(pointer, size) == packed.param_bytes(index)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([1, 2, 3], "kernel ws_gemm_bf16 takes 5 arguments (tmA, tmB, pC, K, N); got 3"),
        (["map", "map", 0, 1, 1], "parameter tmA (.b8 tmA[128]): expected 128 bytes, got str"),
        (["tm", "tm", "tm", 1, 1], "parameter pC (.u64 pC): a tensor map needs a `.b8 [128]`"),
        (["tm", "tm", 0, -1, 1], "parameter K (.u32 K): -1 does not fit in 32 bits"),
        (["tm", "tm", 0, 2.5, 1], "parameter K (.u32 K): expected an int, got float"),
        (["tm", "tm", np.zeros(4), 1, 1], "a numpy array is host memory; copy it with to_device"),
    ],
)
def test_pack_rejects_bad_arguments(args: list[object], message: str) -> None:
    tm = fake_tensor_map()
    args = [tm if isinstance(a, str) and a == "tm" else a for a in args]
    with pytest.raises(LaunchError, match=re.escape(message)):
        pack_parameters(fake_kernel(), args)


def test_pack_float_and_signed_scalars() -> None:
    kernel = fake_kernel(name="scale")
    packed = pack_parameters(kernel, [0.5, -3, 0x1000])
    assert packed.param_bytes(0) == np.float32(0.5).tobytes()
    assert packed.param_bytes(1) == (-3 % 2**32).to_bytes(4, "little")
    assert packed.param_bytes(2) == (0x1000).to_bytes(8, "little")
    with pytest.raises(LaunchError, match="does not fit in 32 bits"):
        param_value(kernel.params[1], 2**31, "scale")  # type: ignore[index] - params parsed
    half = fake_kernel(".entry h(.param .f16 x) { ret; }", "h")
    assert pack_parameters(half, [1.5]).param_bytes(0) == np.float16(1.5).tobytes()
    with pytest.raises(LaunchError, match=r"parameter x \(.f16 x\): .*too large"):
        pack_parameters(half, [1e6])


def test_describe_cuda_array_interface() -> None:
    view = describe(CudaArray(0x2000, (4, 8), "<f2", strides=(32, 2)))
    assert (view.pointer, view.dtype, view.shape, view.strides) == (
        0x2000,
        "float16",
        (4, 8),
        (16, 1),
    )
    assert not view.is_contiguous
    assert describe(CudaArray(0x2000, (4, 8), "<f2")).is_contiguous


def test_describe_torch_like_tensor_without_torch() -> None:
    FakeTensor = type("Tensor", (), {"__module__": "torch"})
    tensor = FakeTensor()
    tensor.data_ptr = lambda: 0x3000
    tensor.is_cuda, tensor.dtype, tensor.shape = True, "torch.bfloat16", (2, 64)
    tensor.stride = lambda: (64, 1)
    view = describe(tensor)
    assert (view.pointer, view.dtype, view.strides) == (0x3000, "bfloat16", (64, 1))
    tensor.is_cuda, tensor.device = False, "cpu"
    with pytest.raises(LaunchError, match="torch tensor is on cpu; move it with .cuda()"):
        describe(tensor, "A")


@pytest.mark.parametrize(
    ("spelling", "name"),
    [
        ("torch.bfloat16", "bfloat16"),
        ("bf16", "bfloat16"),
        (np.dtype(np.float16), "float16"),
        ("<f4", "float32"),
        ("i4", "int32"),
        ("float8_e4m3fn", "float8_e4m3fn"),
    ],
)
def test_dtype_names(spelling: object, name: str) -> None:
    assert dtype_name(spelling) == name


def test_dtype_mismatch_message() -> None:
    with pytest.raises(DTypeMismatchError) as info:
        expect_dtype("torch.float16", "bfloat16", "argument A")
    assert str(info.value) == "argument A: expected element type bfloat16, got float16"


def test_launch_config_normalizes_dims_and_stream() -> None:
    config = LaunchConfig.make(
        (64, 64), 384, 132160, cluster=(2, 1), stream=SimpleNamespace(cuda_stream=7)
    )
    assert config.grid == (64, 64, 1) and config.block == (384, 1, 1)
    assert config.cluster == (2, 1, 1) and config.stream == 7
    with pytest.raises(LaunchError, match="grid: expected 1-3 positive ints"):
        dim3((0, 1), "grid")


# ------------------------------------------------- compiled kernels (what the GPU fuzz found)


class FakeDriver:
    """Stands in for the driver calls of `launch_compiled`, recording what it asks."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.staged: list[np.ndarray] = []
        self.launches: list[tuple] = []
        monkeypatch.setattr(launch_module, "require_gpu", lambda: object())
        monkeypatch.setattr(launch_module, "load_kernel", lambda ptx, name: name)
        monkeypatch.setattr(launch_module, "to_device", self.to_device)
        monkeypatch.setattr(launch_module, "to_host", lambda dev, out: None)
        monkeypatch.setattr(launch_module, "launch", lambda *a, **kw: self.launches.append(a))
        monkeypatch.setattr(launch_module, "kernel_arguments", lambda program, args: list(args))

    def to_device(self, array: np.ndarray) -> np.ndarray:
        self.staged.append(array)
        return array


def compiled_gemm() -> CompiledKernel:
    module = parse_file(make_context(), EXAMPLES / "gemm.mlir")
    return compile_to_ptx(module, CompileOptions(stages=2, mma_depth=1, consumers=1, verify=False))


def gemm_descriptors(m: int, n: int, k: int) -> list[object]:
    make = TensorDescriptor.from_tensor
    a, b = np.ones((m, k), np.float16), np.ones((n, k), np.float16)
    c = np.zeros((m, n), np.float16)
    return [make(a, [128, 64]), make(b, [128, 64]), make(c, [128, 128]), m, n, k]


def test_a_grid_without_programs_launches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeDriver(monkeypatch)
    compiled_gemm().launch((0,), *gemm_descriptors(0, 8, 64))
    assert fake.launches == [] and fake.staged == []


def test_an_empty_descriptor_is_described_by_zeros(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeDriver(monkeypatch)
    compiled_gemm().launch((1,), *gemm_descriptors(1, 8, 0))  # K = 0: A and B have no elements
    a, b, c = fake.staged
    assert a.shape == b.shape == (1, 8) and not a.any() and not b.any()
    assert c.shape == (1, 8) and len(fake.launches) == 1


def test_stand_in_rows_are_16_bytes() -> None:
    for dtype, elements in ((np.float16, 8), (np.float32, 4)):
        stand_in = empty_tensor_stand_in(np.zeros((5, 0, 3), dtype))
        assert stand_in.shape == (1, 1, elements) and stand_in.nbytes == 16


def test_descriptors_accept_arrays_without_elements() -> None:
    descriptor = TensorDescriptor.from_tensor(np.zeros((3, 0), np.float16), [128, 64])
    assert descriptor.strides == (0, 1)


def test_kernel_arguments_fill_every_param_of_a_compiled_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A descriptor argument gives its tensor map (the kernel's box and swizzle), pointer,
    extents and strides; a scalar gives itself, in the kernel's `.param` order. Maps are
    encoded once per address and layout: a launch whose output moved encodes only its map."""
    maps: list[tuple] = []

    def fake_encode(spec, source=None):
        maps.append((spec.name, spec.address, spec.box, spec.swizzle))
        return f"map {spec.name} at {spec.address:#x}"

    monkeypatch.setattr(tensormap_module, "encode_tiled", fake_encode)
    monkeypatch.setattr(launch_module, "TENSOR_MAPS", tensormap_module.TensorMapCache())
    kernel = compiled_gemm()
    a = SimpleNamespace(__cuda_array_interface__=cuda_interface((300, 160), 0x1000))
    b = SimpleNamespace(__cuda_array_interface__=cuda_interface((200, 160), 0x2000))
    c = SimpleNamespace(__cuda_array_interface__=cuda_interface((300, 200), 0x3000))
    values = launch_module.kernel_arguments(kernel, [a, b, c, 300, 200, 160])
    assert len(values) == len(kernel.params) == 3 * 5 + 3
    assert values[:5] == ["map a_desc_tmap at 0x1000", 0x1000, 300, 160, 160]
    assert values[-3:] == [300, 200, 160]
    infos = [kernel.tensor_maps[i] for i in range(3)]
    names = ("a_desc_tmap", "b_desc_tmap", "c_desc_tmap")
    assert maps == [
        (n, address, i.box, tensormap_module.Swizzle.parse(i.swizzle or None))
        for n, address, i in zip(names, (0x1000, 0x2000, 0x3000), infos, strict=True)
    ]
    moved = SimpleNamespace(__cuda_array_interface__=cuda_interface((300, 200), 0x4000))
    values = launch_module.kernel_arguments(kernel, [a, b, moved, 300, 200, 160])
    assert len(maps) == 4 and maps[-1][:2] == ("c_desc_tmap", 0x4000)
    assert values[10] == "map c_desc_tmap at 0x4000"
    assert launch_module.TENSOR_MAPS.encoded == 4


def cuda_interface(shape: tuple[int, int], pointer: int) -> dict[str, object]:
    return {"shape": shape, "typestr": "<f2", "data": (pointer, False), "version": 3}
