"""The kernel cache: what changes the key, and two processes writing one entry at once."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tawa_xdsl.runtime.cache import KernelCache, cache_key, compiler_version, decode_entry

PTX = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def test_key_is_stable_and_ignores_option_order() -> None:
    one = cache_key(PTX, {"depth": 3, "mma_depth": 2}, version="v1")
    two = cache_key(PTX, {"mma_depth": 2, "depth": 3}, version="v1")
    assert one == two and len(one) == 64


@pytest.mark.parametrize(
    ("source", "options", "version", "target"),
    [
        (PTX + "// more\n", {"depth": 3}, "v1", "sm_90a"),
        (PTX, {"depth": 4}, "v1", "sm_90a"),
        (PTX, {"depth": 3}, "v2", "sm_90a"),
        (PTX, {"depth": 3}, "v1", "sm_100a"),
    ],
)
def test_key_changes_with_each_input(
    source: str, options: dict[str, int], version: str, target: str
) -> None:
    base = cache_key(PTX, {"depth": 3}, version="v1", target="sm_90a")
    assert cache_key(source, options, version=version, target=target) != base


def test_default_version_names_the_compiler() -> None:
    assert compiler_version().startswith("tawa-xdsl ")
    assert cache_key(PTX) == cache_key(PTX, {}, version=compiler_version())


def test_put_get_round_trip(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path)
    key = cache_key(PTX, version="v1")
    assert cache.get(key) is None
    cache.put(key, PTX.encode(), {"entry": "gemm", "shared_bytes": 132160})
    entry = cache.get(key)
    assert entry is not None
    assert entry.payload == PTX.encode()
    assert entry.meta == {"entry": "gemm", "shared_bytes": 132160}
    assert not list(cache.path(key).parent.glob("*.tmp"))


def test_get_or_build_builds_once(tmp_path: Path) -> None:
    cache, calls = KernelCache(tmp_path), []

    def build() -> tuple[bytes, dict[str, object]]:
        calls.append(1)
        return b"cubin", {"n": 1}

    key = cache_key(PTX, version="v1")
    assert cache.get_or_build(key, build).payload == b"cubin"
    assert cache.get_or_build(key, build).payload == b"cubin"
    assert len(calls) == 1


def test_torn_or_foreign_files_read_as_misses(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path)
    key = cache_key(PTX, version="v1")
    cache.put(key, b"x" * 100)
    path = cache.path(key)
    whole = path.read_bytes()
    path.write_bytes(whole[:-10])  # truncated payload
    assert cache.get(key) is None
    path.write_bytes(b"not a cache entry")
    assert cache.get(key) is None
    assert decode_entry(whole.replace(b"x", b"y")) is None  # payload does not match its hash


def test_key_must_be_hex(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="hex digest"):
        KernelCache(tmp_path).path("../../etc/passwd")


def test_default_directory_from_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAWA_CACHE_DIR", str(tmp_path / "c"))
    assert KernelCache().root == tmp_path / "c"


WRITER = textwrap.dedent(
    """
    import sys
    from tawa_xdsl.runtime.cache import KernelCache
    root, key, fill, rounds = sys.argv[1], sys.argv[2], sys.argv[3].encode(), int(sys.argv[4])
    cache = KernelCache(root)
    torn = 0
    for i in range(rounds):
        cache.put(key, fill * (200_000 + i % 7), {"writer": sys.argv[3]})
        entry = cache.get(key)
        if entry is None or len(set(entry.payload)) != 1:
            torn += 1
    print(torn)
    """
)


def test_two_processes_writing_one_key(tmp_path: Path) -> None:
    """Two writers race on one key while each reads back; nobody ever sees a torn entry."""
    key = cache_key(PTX, version="race")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), key, fill, "150"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for fill in ("a", "b")
    ]
    for writer in writers:
        out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
        assert out.strip() == "0"
    entry = KernelCache(tmp_path).get(key)
    assert entry is not None and entry.meta["writer"] in ("a", "b")
    assert entry.payload == entry.meta["writer"].encode() * len(entry.payload)
    assert not list(tmp_path.glob("*/*.tmp"))
