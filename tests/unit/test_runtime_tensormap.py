"""Tensor-map validation on the CPU: every rule fails with one line naming the argument."""

import pytest

from tawa_xdsl.runtime.errors import TensorMapError
from tawa_xdsl.runtime.tensormap import Swizzle, TensorMapSpec, aligned_descriptor_buffer


def gemm_operand(**changes: object) -> TensorMapSpec:
    """A row-major [M=256, K=512] bf16 operand copied in 128x64 boxes with 128B swizzle."""
    fields: dict[str, object] = dict(
        address=0x7F0000000000,
        dtype="bfloat16",
        shape=(256, 512),
        strides=(512, 1),
        box=(128, 64),
        swizzle=Swizzle.B128,
        name="A",
    )
    fields.update(changes)
    return TensorMapSpec(**fields)  # type: ignore[arg-type] - fields checked by the dataclass


def test_valid_spec_reverses_into_driver_order() -> None:
    args = gemm_operand().validate().driver_arguments()
    assert args["data_type"] == 9  # CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
    assert args["global_dim"] == [512, 256]
    assert args["global_strides_bytes"] == [1024]
    assert args["box_dim"] == [64, 128]
    assert args["element_strides"] == [1, 1]
    assert args["swizzle"] == 3


def test_three_d_spec_strides_in_bytes_innermost_first() -> None:
    spec = TensorMapSpec(0x1000, "float16", (4, 64, 128), (64 * 128, 128, 1), (1, 64, 64))
    assert spec.validate().driver_arguments()["global_strides_bytes"] == [256, 16384]
    assert spec.box_bytes == 64 * 64 * 2


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"strides": (500, 1), "shape": (256, 500)},
            "A: strides: dim 0 stride is 1000 bytes, "
            "not a multiple of 16 (pad rows to 504 elements)",
        ),
        ({"strides": (1, 256)}, "A: strides: the innermost dim 1 has stride 256"),
        ({"box": (512, 64)}, "A: box: dim 0 is 512; the TMA needs 1..256"),
        ({"box": (128, 0)}, "A: box: dim 1 is 0; the TMA needs 1..256"),
        (
            {"box": (128, 128)},
            "A: box: inner dim is 256 bytes, wider than the 128-byte swizzle "
            "span (at most 64 bfloat16 elements",
        ),
        ({"box": (128, 4)}, "A: box: inner dim is 8 bytes; the TMA needs a multiple of 16"),
        ({"address": 0x1008}, "A: address: 0x1008 is not 16-byte aligned"),
        ({"dtype": "complex64"}, "A: dtype: unsupported element type"),
        (
            {"shape": (1, 2, 3, 4, 5, 6), "strides": (1,) * 6, "box": (1,) * 6},
            "A: shape: rank 6 is outside the TMA's 1..5",
        ),
        ({"strides": (512,)}, "A: strides: has 1 entries for a rank-2 shape"),
        ({"shape": (0, 512)}, "A: shape: dim 0 is 0"),
        ({"element_strides": (1, 9)}, "A: element_strides: dim 1 is 9"),
    ],
)
def test_invalid_spec_names_the_argument(changes: dict[str, object], message: str) -> None:
    with pytest.raises(TensorMapError) as info:
        gemm_operand(**changes).validate()
    text = str(info.value)
    assert text.startswith(message), text
    assert "\n" not in text


def test_swizzle_span_depends_on_element_size() -> None:
    # fp8 rows may hold 128 elements under 128B swizzle; bf16 rows only 64.
    gemm_operand(dtype="float8_e4m3fn", box=(128, 128)).validate()
    gemm_operand(swizzle=Swizzle.B64, box=(64, 32)).validate()
    with pytest.raises(TensorMapError, match="64-byte swizzle span"):
        gemm_operand(swizzle=Swizzle.B64).validate()


def test_unswizzled_box_may_be_wide() -> None:
    gemm_operand(swizzle=Swizzle.NONE, box=(8, 256)).validate()


@pytest.mark.parametrize(
    ("text", "expected"),
    [("128B", Swizzle.B128), (64, Swizzle.B64), ("none", Swizzle.NONE), (None, Swizzle.NONE)],
)
def test_swizzle_parse(text: object, expected: Swizzle) -> None:
    assert Swizzle.parse(text) is expected  # type: ignore[arg-type] - exercising loose input


def test_swizzle_parse_rejects_other_spans() -> None:
    with pytest.raises(TensorMapError, match="swizzle: expected none, 32B, 64B or 128B"):
        Swizzle.parse("256B")


def test_descriptor_buffer_is_128_aligned() -> None:
    for _ in range(16):
        buffer = aligned_descriptor_buffer()
        assert buffer.ctypes.data % 128 == 0 and buffer.nbytes == 128
