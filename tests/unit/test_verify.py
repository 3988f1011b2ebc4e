"""tawa-verify on the compiler's own output: every GEMM pipeline option is proved, quickly;
a planted bug gives exit 1 and a trace; --json."""

import itertools
import json
import time
from pathlib import Path

import pytest

from tawa_xdsl.diagnostics import parse_module
from tawa_xdsl.dialects import make_context
from tawa_xdsl.tools.tawa_verify import main
from tawa_xdsl.transforms.lower_aref import lower_arefs
from tawa_xdsl.verify.check import verify_module
from tawa_xdsl.verify.samples import gemm_aref

EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.mark.parametrize(
    "stages,mma_depth,consumers,persistent",
    [
        (s, p, c, pe)
        for s, p, c, pe in itertools.product([1, 2, 3], [1, 2], [1, 2], [False, True])
        if p <= s
    ],
)
def test_gemm_pipeline_is_proved(stages, mma_depth, consumers, persistent):
    from tawa_xdsl.transforms.warp_specialize import warp_specialize

    module = parse_module(make_context(), (EXAMPLES / "gemm.mlir").read_text())
    module = warp_specialize(
        module, stages=stages, mma_depth=mma_depth, consumers=consumers, persistent=persistent
    )
    lower_arefs(module)
    start = time.perf_counter()
    verdicts = verify_module(module)
    assert verdicts and all(v.proved for v in verdicts), [v.message for v in verdicts]
    assert time.perf_counter() - start < 10


def test_shallow_ring_deadlock_is_reported(tmp_path, capsys):
    path = tmp_path / "k.mlir"
    path.write_text(gemm_aref(depth=1, mma_depth=2))
    assert main([str(path), "-p", "lower-aref"]) == 1
    out = capsys.readouterr().out
    assert "FAILED: ring ring: DEADLOCK" in out and "blocked at" in out


def test_json_and_proved_lines(tmp_path, capsys):
    path = tmp_path / "k.mlir"
    module = parse_module(make_context(), gemm_aref(depth=2, mma_depth=2, consumers=2))
    lower_arefs(module)
    path.write_text(str(module))
    assert main([str(path)]) == 0
    assert capsys.readouterr().out.startswith("proved: ring ring:")
    assert main([str(path), "--json"]) == 0
    (verdict,) = json.loads(capsys.readouterr().out)
    assert verdict["proved"] and verdict["method"] == "certificate"


@pytest.mark.parametrize("example", ["attention", "attention_causal"])
@pytest.mark.parametrize(
    "stages,mma_depth,consumers,persistent", [(1, 1, 1, False), (2, 2, 2, True)]
)
def test_attention_pipeline_is_proved(example, stages, mma_depth, consumers, persistent):
    from tawa_xdsl.transforms.warp_specialize import warp_specialize

    module = parse_module(make_context(), (EXAMPLES / f"{example}.mlir").read_text())
    module = warp_specialize(
        module, stages=stages, mma_depth=mma_depth, consumers=consumers, persistent=persistent
    )
    lower_arefs(module)
    verdicts = verify_module(module)
    assert [v.ring for v in verdicts] == ["q3_ring", "k3_ring", "v3_ring"]
    assert all(v.proved and v.method == "certificate" for v in verdicts), [
        v.summary() for v in verdicts
    ]


def test_compile_pipeline_rejects_a_broken_ring(monkeypatch):
    """compile_to_ptx proves the rings after lower-aref; a planted bug is a one-line error."""
    from tawa_xdsl.backend import compile as backend
    from tawa_xdsl.transforms import lower_aref
    from tawa_xdsl.verify.check import ProtocolError

    module = parse_module(make_context(), (EXAMPLES / "gemm.mlir").read_text())
    real = lower_aref.protocol.empty_init_count
    monkeypatch.setattr(lower_aref.protocol, "empty_init_count", lambda k: real(k) + 1)
    with pytest.raises(ProtocolError) as error:
        backend.compile_to_ptx(module, backend.CompileOptions(stages=2, mma_depth=1, consumers=1))
    message = str(error.value)
    assert "\n" not in message and "ring a_b_ring can go wrong: DEADLOCK" in message
    opts = backend.CompileOptions(stages=2, mma_depth=1, consumers=1, verify=False)
    assert backend.compile_to_ptx(module, opts).ptx  # the check can be skipped
