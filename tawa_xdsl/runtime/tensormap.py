"""TMA tensor maps: validate a tile-copy description, then encode it for the driver.

Shapes and strides here are in numpy order (outermost dimension first), as users write them;
`TensorMapSpec.driver_arguments` reverses them into the innermost-first order of
`cuTensorMapEncodeTiled` (reference/hopper-ptx.md §3.2).

A map is encoded through ctypes into a 128-byte, 128-aligned numpy buffer that `TensorMap` owns.
cuda-python's own `CUtensorMap` object can sit at an address that is only 16-byte aligned
(hopper-ptx.md §3), and the driver requires 64 (CUDA 13: 128). A kernel takes the map by value
(`.param .align 64 .b8 tm[128]`), so `launch` copies those 128 bytes into the parameter buffer.

The rules checked before the driver sees anything, each failing with a one-line TensorMapError
naming the map and the argument:

* rank 1..5; each dimension in [1, 2**32];
* the innermost dimension is contiguous; every other stride is a multiple of 16 bytes, < 2**40;
* the global address is 16-byte aligned;
* each box dimension is in [1, 256], and the box's inner row is a multiple of 16 bytes;
* with a swizzle, the box's inner row is at most the swizzle span (32, 64 or 128 bytes);
* element strides in [1, 8]; the element type is one the TMA knows.
"""

from __future__ import annotations

import ctypes
import enum
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tawa_xdsl.runtime.dtypes import dtype_name, itemsize
from tawa_xdsl.runtime.errors import CudaError, DTypeMismatchError, TensorMapError

TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGNMENT = 128
MAX_RANK = 5
MAX_BOX = 256
GLOBAL_ALIGNMENT = 16
STRIDE_MULTIPLE = 16


class Swizzle(enum.IntEnum):
    """CUtensorMapSwizzle; the value of each member is the driver's enum value."""

    NONE = 0
    B32 = 1
    B64 = 2
    B128 = 3

    @property
    def span(self) -> int:
        """Bytes in one swizzled row (0 when not swizzled)."""
        return {0: 0, 1: 32, 2: 64, 3: 128}[self.value]

    @classmethod
    def parse(cls, value: Swizzle | int | str | None) -> Swizzle:
        """Accept `Swizzle.B128`, 128 (bytes), '128B', 'none' or None."""
        if isinstance(value, Swizzle):
            return value
        if value is None:
            return cls.NONE
        text = str(value).strip().upper().removesuffix("B")
        by_span = {"0": cls.NONE, "NONE": cls.NONE, "32": cls.B32, "64": cls.B64, "128": cls.B128}
        if text in by_span:
            return by_span[text]
        raise TensorMapError(f"swizzle: expected none, 32B, 64B or 128B, got {value!r}")


class L2Promotion(enum.IntEnum):
    """CUtensorMapL2promotion."""

    NONE = 0
    B64 = 1
    B128 = 2
    B256 = 3


class OOBFill(enum.IntEnum):
    """CUtensorMapFloatOOBfill: out-of-bounds elements read as zero, or as NaN (no FMA use)."""

    ZERO = 0
    NAN_REQUEST_ZERO_FMA = 1


# CUtensorMapDataType by canonical element-type name; 1-byte types travel as UINT8 payloads.
TMA_DATA_TYPE: dict[str, int] = {
    "uint8": 0,
    "int8": 0,
    "bool": 0,
    "float8_e4m3fn": 0,
    "float8_e5m2": 0,
    "uint16": 1,
    "int16": 1,
    "uint32": 2,
    "int32": 3,
    "uint64": 4,
    "int64": 5,
    "float16": 6,
    "float32": 7,
    "float64": 8,
    "bfloat16": 9,
}


@dataclass(frozen=True)
class TensorMapSpec:
    """A tiled TMA description of a global tensor, in numpy order (outermost first).

    `strides` are in elements, like torch's `stride()`; the innermost must be 1.
    """

    address: int
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: Swizzle = Swizzle.NONE
    element_strides: tuple[int, ...] | None = None
    l2_promotion: L2Promotion = L2Promotion.B128
    oob_fill: OOBFill = OOBFill.ZERO
    name: str = "tensor map"

    def fail(self, argument: str, message: str) -> TensorMapError:
        """A TensorMapError naming this map and the offending argument."""
        return TensorMapError(f"{self.name}: {argument}: {message}")

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def itemsize(self) -> int:
        return itemsize(self.dtype)

    @property
    def box_bytes(self) -> int:
        """Bytes one copy moves: the full box, out-of-bounds elements included."""
        return int(np.prod(self.box)) * self.itemsize

    def validate(self) -> TensorMapSpec:
        """Check every rule in the module docstring; return self when all hold."""
        self.check_dtype()
        self.check_rank()
        self.check_address()
        self.check_strides()
        self.check_box()
        return self

    def check_dtype(self) -> None:
        try:
            name = dtype_name(self.dtype)
        except DTypeMismatchError as exc:
            raise self.fail("dtype", str(exc)) from None
        if name not in TMA_DATA_TYPE:
            raise self.fail("dtype", f"the TMA cannot move {name} elements")

    def check_rank(self) -> None:
        if not 1 <= self.rank <= MAX_RANK:
            raise self.fail("shape", f"rank {self.rank} is outside the TMA's 1..{MAX_RANK}")
        for what, values in (("strides", self.strides), ("box", self.box)):
            if len(values) != self.rank:
                raise self.fail(what, f"has {len(values)} entries for a rank-{self.rank} shape")
        if self.element_strides is not None and len(self.element_strides) != self.rank:
            raise self.fail("element_strides", f"needs {self.rank} entries")
        for axis, extent in enumerate(self.shape):
            if not 1 <= extent <= 2**32:
                raise self.fail("shape", f"dim {axis} is {extent}; the TMA needs 1..2**32")

    def check_address(self) -> None:
        if self.address % GLOBAL_ALIGNMENT:
            raise self.fail("address", f"0x{self.address:x} is not {GLOBAL_ALIGNMENT}-byte aligned")

    def check_strides(self) -> None:
        if self.strides[-1] != 1:
            raise self.fail(
                "strides",
                f"the innermost dim {self.rank - 1} has stride {self.strides[-1]}; the TMA "
                "needs it contiguous (stride 1): make the tensor contiguous",
            )
        for axis in range(self.rank - 1):
            stride_bytes = self.strides[axis] * self.itemsize
            if stride_bytes <= 0 or stride_bytes >= 2**40:
                raise self.fail("strides", f"dim {axis} stride {stride_bytes} B is out of range")
            if stride_bytes % STRIDE_MULTIPLE:
                padded = -(-stride_bytes // STRIDE_MULTIPLE) * STRIDE_MULTIPLE
                raise self.fail(
                    "strides",
                    f"dim {axis} stride is {stride_bytes} bytes, not a multiple of "
                    f"{STRIDE_MULTIPLE} (pad rows to {padded // self.itemsize} elements)",
                )

    def check_box(self) -> None:
        for axis, extent in enumerate(self.box):
            if not 1 <= extent <= MAX_BOX:
                raise self.fail("box", f"dim {axis} is {extent}; the TMA needs 1..{MAX_BOX}")
        inner_bytes = self.box[-1] * self.itemsize
        if inner_bytes % 16:
            raise self.fail(
                "box", f"inner dim is {inner_bytes} bytes; the TMA needs a multiple of 16"
            )
        span = self.swizzle.span
        if span and inner_bytes > span:
            raise self.fail(
                "box",
                f"inner dim is {inner_bytes} bytes, wider than the {span}-byte swizzle span "
                f"(at most {span // self.itemsize} {dtype_name(self.dtype)} elements; split the "
                "tile into slabs or a 3-D map)",
            )
        for axis, step in enumerate(self.element_strides or ()):
            if not 1 <= step <= 8:
                raise self.fail("element_strides", f"dim {axis} is {step}; the TMA needs 1..8")

    def driver_arguments(self) -> dict[str, Any]:
        """The arguments of cuTensorMapEncodeTiled, innermost dimension first."""
        element_strides = self.element_strides or (1,) * self.rank
        return {
            "data_type": TMA_DATA_TYPE[dtype_name(self.dtype)],
            "rank": self.rank,
            "address": self.address,
            "global_dim": list(reversed(self.shape)),
            "global_strides_bytes": [s * self.itemsize for s in reversed(self.strides[:-1])],
            "box_dim": list(reversed(self.box)),
            "element_strides": list(reversed(element_strides)),
            "interleave": 0,
            "swizzle": int(self.swizzle),
            "l2_promotion": int(self.l2_promotion),
            "oob_fill": int(self.oob_fill),
        }


@dataclass
class TensorMap:
    """An encoded 128-byte CUtensorMap in a 128-aligned host buffer, plus what it describes.

    `source` keeps the described tensor alive as long as the map is; `data` is a copy of the
    128 bytes, what a launch packs into its parameters.
    """

    spec: TensorMapSpec
    buffer: np.ndarray
    source: Any = field(default=None, repr=False)
    address: int = field(init=False)
    data: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.address = int(self.buffer.ctypes.data)  # host address of the 128 descriptor bytes
        self.data = self.buffer.tobytes()

    def to_bytes(self) -> bytes:
        return self.data


def aligned_descriptor_buffer() -> np.ndarray:
    """128 zero bytes at a 128-aligned host address (a view into a larger owning array)."""
    raw = np.zeros(TENSOR_MAP_BYTES + TENSOR_MAP_ALIGNMENT, dtype=np.uint8)
    offset = (-raw.ctypes.data) % TENSOR_MAP_ALIGNMENT
    return raw[offset : offset + TENSOR_MAP_BYTES]


def encode_tiled(spec: TensorMapSpec, source: Any = None) -> TensorMap:
    """Validate `spec` and encode it with the driver's cuTensorMapEncodeTiled (via ctypes)."""
    from tawa_xdsl.runtime.driver import libcuda

    spec.validate()
    args = spec.driver_arguments()
    rank = args["rank"]
    buffer = aligned_descriptor_buffer()
    encode = libcuda().cuTensorMapEncodeTiled
    encode.restype = ctypes.c_int
    result = encode(
        ctypes.c_void_p(int(buffer.ctypes.data)),
        ctypes.c_int(args["data_type"]),
        ctypes.c_uint32(rank),
        ctypes.c_void_p(args["address"]),
        (ctypes.c_uint64 * rank)(*args["global_dim"]),
        (ctypes.c_uint64 * max(rank - 1, 1))(*(args["global_strides_bytes"] or [0])),
        (ctypes.c_uint32 * rank)(*args["box_dim"]),
        (ctypes.c_uint32 * rank)(*args["element_strides"]),
        ctypes.c_int(args["interleave"]),
        ctypes.c_int(args["swizzle"]),
        ctypes.c_int(args["l2_promotion"]),
        ctypes.c_int(args["oob_fill"]),
    )
    if result != 0:
        raise CudaError("cuTensorMapEncodeTiled", f"CUresult {result}", f"{spec.name}: {args}")
    return TensorMap(spec, buffer, source)


class TensorMapCache:
    """Encoded maps by what they encode (address, element type, shape, strides, box, swizzle),
    the least recently used dropped past `capacity`: a launch whose other tensors moved
    encodes only the maps of those. The key is the tensor's description (`ArrayView`: the
    launch describes each argument once for its pointer, extents and strides too); the maps
    hold no tensor (their `source` is None)."""

    def __init__(self, capacity: int = 256):
        self.capacity = capacity
        self.maps: OrderedDict[Hashable, TensorMap] = OrderedDict()
        self.encoded = 0

    def get(self, tensor: Any, box: Sequence[int], swizzle: Swizzle | int | None, name: str
            ) -> TensorMap:  # fmt: skip
        """The map over `tensor` with this box and swizzle (encoded on first use)."""
        from tawa_xdsl.runtime.memory import describe

        return self.get_view(describe(tensor, name), box, swizzle, name)

    def get_view(self, view: Any, box: Sequence[int], swizzle: Swizzle | int | None, name: str
                 ) -> TensorMap:  # fmt: skip
        """The map over the tensor an `ArrayView` describes (encoded on first use)."""
        key = (view.pointer, view.dtype, view.shape, view.strides, tuple(box), swizzle)
        found = self.maps.get(key)
        if found is not None:
            self.maps.move_to_end(key)
            return found
        spec = TensorMapSpec(
            address=view.pointer, dtype=view.dtype, shape=view.shape, strides=view.strides,
            box=tuple(int(b) for b in box), swizzle=Swizzle.parse(swizzle), name=name,
        )  # fmt: skip
        encoded = encode_tiled(spec)
        self.encoded += 1
        self.maps[key] = encoded
        if len(self.maps) > self.capacity:
            self.maps.popitem(last=False)
        return encoded


def tensor_map(
    tensor: Any,
    box: Sequence[int],
    *,
    swizzle: Swizzle | int | str | None = None,
    name: str = "tensor map",
    l2_promotion: L2Promotion = L2Promotion.B128,
    oob_fill: OOBFill = OOBFill.ZERO,
) -> TensorMap:
    """Encode a map over a device tensor (torch, `__cuda_array_interface__`, DeviceArray).

    `box` is in numpy order: for a row-major [M, K] bf16 matrix, `box=(128, 64)` copies 128 rows
    of 64 elements. The map keeps `tensor` alive.
    """
    from tawa_xdsl.runtime.memory import describe

    view = describe(tensor, name)
    spec = TensorMapSpec(
        address=view.pointer,
        dtype=view.dtype,
        shape=view.shape,
        strides=view.strides,
        box=tuple(int(b) for b in box),
        swizzle=Swizzle.parse(swizzle),
        l2_promotion=l2_promotion,
        oob_fill=oob_fill,
        name=name,
    )
    return encode_tiled(spec, source=tensor)
