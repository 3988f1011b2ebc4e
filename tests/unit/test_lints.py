"""Lints for what the phase model cannot see: each planted fault is reported with its source
location; the compiler's own output is clean."""

import pytest

from tawa_xdsl.diagnostics import parse_module
from tawa_xdsl.dialects import make_context
from tawa_xdsl.tools.tawa_verify import main
from tawa_xdsl.verify.lints import lint_module

PIPELINE = (
    "tawa-warp-specialize{stages=2 mma-depth=1 consumers=2 persistent=%s},lower-aref,"
    "lower-to-nvgpu{epilogue=tma}"
)


def _lowered(persistent: str = "false", example: str = "gemm", pipeline: str = PIPELINE) -> str:
    from xdsl.passes import PassPipeline

    from tawa_xdsl.transforms import get_all_passes

    with open(f"examples/{example}.mlir") as f:
        module = parse_module(make_context(), f.read())
    PassPipeline.parse_spec(get_all_passes(), pipeline % persistent).apply(make_context(), module)
    return str(module)


@pytest.fixture(scope="module")
def gemm_tma_epilogue() -> str:
    return _lowered()


def _lints(text: str) -> list[str]:
    return [str(x) for x in lint_module(parse_module(make_context(), text, "k.mlir"))]


def _drop(text: str, needle: str, occurrence: int) -> str:
    lines = text.splitlines()
    hits = [n for n, line in enumerate(lines) if needle in line]
    del lines[hits[occurrence]]
    return "\n".join(lines)


@pytest.mark.parametrize("example", ["gemm", "attention", "attention_causal"])
@pytest.mark.parametrize("persistent", ["false", "true"])
def test_compiler_output_is_clean(example, persistent):
    assert _lints(_lowered(persistent, example)) == []


def test_missing_proxy_fence(gemm_tma_epilogue):
    lints = _lints(_drop(gemm_tma_epilogue, "nvgpu.fence_proxy_async", 0))
    assert len(lints) == 1 and "error: [proxy-fence] TMA store" in lints[0]
    assert lints[0].startswith("k.mlir:") and "nvgpu.fragment_store at k.mlir:" in lints[0]


def test_missing_group_barrier_before_elected_tma_store(gemm_tma_epilogue):
    text = gemm_tma_epilogue
    fence = next(n for n, line in enumerate(text.splitlines()) if "fence_proxy_async" in line)
    barrier = next(
        n for n, line in enumerate(text.splitlines()) if n > fence and "named_barrier_sync" in line
    )
    lines = text.splitlines()
    del lines[barrier]
    lints = _lints("\n".join(lines))
    assert len(lints) == 1 and "error: [publication] TMA store by one elected thread" in lints[0]


@pytest.fixture(scope="module")
def gemm_mbarrier() -> str:
    return _lowered(pipeline=PIPELINE.rsplit(",", 1)[0])


def test_cta_barrier_in_group(gemm_mbarrier):
    lines = gemm_mbarrier.splitlines()
    at = next(n for n, line in enumerate(lines) if "aref.group consumer" in line)
    lines.insert(at + 1, "nvgpu.cta_barrier")
    lints = _lints("\n".join(lines))
    assert len(lints) == 1 and "error: [cta-barrier]" in lints[0]
    assert f"k.mlir:{at + 2}:" in lints[0]


REGISTER_PAYLOAD = """
func.func @k(%n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %full = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<1>
  %buf = nvgpu.smem_alloc : !nvgpu.smem<1x64x64xf16, swizzle 128>
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      %z = arith.constant 0.0 : f16
      %v = tile.splat %z : f16 -> tensor<64x64xf16>
      nvgpu.smem_store %v, %buf[%c0] : tensor<64x64xf16>, !nvgpu.smem<1x64x64xf16, swizzle 128>
      FENCE
      BARRIER
      nvgpu.mbarrier_arrive %full[%c0] : !nvgpu.mbarrier<1>
    }
    aref.group consumer warpgroups(1) registers(232) {
      nvgpu.mbarrier_wait %full[%c0], %c0 : !nvgpu.mbarrier<1>
    }
  }
  func.return
}
"""


@pytest.mark.parametrize(
    "fence,barrier,expected",
    [
        (True, True, []),
        (False, True, ["proxy-fence"]),
        (True, False, ["publication"]),
        (False, False, ["publication", "proxy-fence"]),
    ],
)
def test_register_payload_publication(fence, barrier, expected):
    text = REGISTER_PAYLOAD.replace("FENCE", "nvgpu.fence_proxy_async" if fence else "")
    text = text.replace("BARRIER", "nvgpu.named_barrier_sync 1, 128" if barrier else "")
    lints = _lints(text)
    assert [x.split("[")[1].split("]")[0] for x in lints] == expected
    arrive = next(n for n, line in enumerate(text.splitlines(), 1) if "mbarrier_arrive" in line)
    assert all(x.startswith(f"k.mlir:{arrive}:") for x in lints)  # at the arrive


def test_tawa_verify_prints_lints(tmp_path, capsys, gemm_mbarrier):
    lines = gemm_mbarrier.splitlines()
    at = next(n for n, line in enumerate(lines) if "aref.group producer" in line)
    lines.insert(at + 1, "nvgpu.cta_barrier")
    path = tmp_path / "k.mlir"
    path.write_text("\n".join(lines))
    assert main([str(path)]) == 1
    out = capsys.readouterr().out
    assert f"k.mlir:{at + 2}:1: error: [cta-barrier]" in out and "proved: ring a_b_ring" in out


def test_named_barrier_count():
    text = REGISTER_PAYLOAD.replace("FENCE", "nvgpu.fence_proxy_async")
    text = text.replace("BARRIER", "nvgpu.named_barrier_sync 1, 256")
    lints = _lints(text)
    assert len(lints) == 1 and "warning: [named-barrier-count] group barrier for 256" in lints[0]
