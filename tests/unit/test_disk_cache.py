"""The disk cache of compiled kernels across processes (`compiler.compile_cached`): a
second process compiling the same kernel reads it from the disk, and a cache directory that
cannot be used costs one warning, never the compile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from tawa_xdsl.compiler import compile_cached
from tawa_xdsl.runtime import cache as kernel_cache
from tawa_xdsl.runtime.cache import KernelCache

# Compiles the library's @jit GEMM (tawa_xdsl.kernels.gemm) to PTX through the jit path, then
# prints whether the disk cache hit and how long the PTX took (the frontend's IR generation
# included).
CHILD = """
import json, time
from tawa_xdsl.frontend.signature import DescriptorArg, ScalarArg
import tawa_xdsl.language as tl
from tawa_xdsl.runtime import cache
from tawa_xdsl.kernels.gemm import gemm
start = time.perf_counter()
compiled = gemm.compile(
    DescriptorArg(tl.float16, (128, 64)), DescriptorArg(tl.float16, (128, 64)),
    DescriptorArg(tl.float16, (128, 128)), ScalarArg(tl.int32), ScalarArg(tl.int32),
    ScalarArg(tl.int32), BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8,
)
ptx = compiled.ir["ptx"]
seconds = time.perf_counter() - start
print(json.dumps({"hits": cache.STATS.hits, "misses": cache.STATS.misses,
                  "seconds": seconds, "ptx_lines": len(ptx.splitlines())}))
"""


def compile_in_a_new_process(cache_dir: Path) -> dict:
    env = {**os.environ, "TAWA_CACHE_DIR": str(cache_dir)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_second_process_reads_the_kernel_from_disk(tmp_path: Path) -> None:
    first = compile_in_a_new_process(tmp_path)
    assert (first["hits"], first["misses"]) == (0, 1)
    second = compile_in_a_new_process(tmp_path)
    assert (second["hits"], second["misses"]) == (1, 0)
    assert second["ptx_lines"] == first["ptx_lines"]
    print(f"compile: {first['seconds']:.2f} s cold, {second['seconds']:.3f} s from the disk cache")
    assert second["seconds"] < 1.5  # a sanity bound; the target (< 0.3 s) is for the H200 host
    assert len(list(tmp_path.glob("*/*.kernel"))) == 1


def gemm_module():
    import tawa_xdsl.language as tl
    from tawa_xdsl.kernels.gemm import gemm_tile_ir

    return gemm_tile_ir(128, 128, 64, tl.float16)


def test_an_entry_holds_the_whole_kernel(tmp_path: Path) -> None:
    store = KernelCache(tmp_path)
    built = compile_cached(gemm_module(), cache=store)
    read = compile_cached(gemm_module(), cache=store)
    assert read == built  # PTX, params, tensor maps, smem, threads, the IR of every stage


def test_a_corrupt_entry_is_a_miss(tmp_path: Path) -> None:
    store = KernelCache(tmp_path)
    built = compile_cached(gemm_module(), cache=store)
    (entry,) = tmp_path.glob("*/*.kernel")
    entry.write_bytes(entry.read_bytes()[:-100])  # a torn write
    misses = kernel_cache.STATS.misses
    assert compile_cached(gemm_module(), cache=store) == built
    assert kernel_cache.STATS.misses == misses + 1


@pytest.mark.parametrize("kind", ["file", "read-only"])
def test_an_unusable_directory_is_one_warning(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "cache"
    if kind == "file":
        root.write_text("not a directory")
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only directories")
        root.mkdir()
        root.chmod(0o500)
    kernel_cache.WARNED.discard(str(root))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = compile_cached(gemm_module(), cache=KernelCache(root))
        second = compile_cached(gemm_module(), cache=KernelCache(root))
    assert first == second and first.ptx
    unusable = [w for w in caught if "is unusable" in str(w.message)]
    assert len(unusable) == 1, [str(w.message) for w in caught]
    assert str(root) in str(unusable[0].message)


def test_the_key_follows_the_compiler_sources() -> None:
    version = kernel_cache.compiler_version()
    assert kernel_cache.source_hash()[:16] in version
