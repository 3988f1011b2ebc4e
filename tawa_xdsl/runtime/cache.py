"""An on-disk cache of compiled kernels, safe when several processes write at once.

A key is the sha256 of (source IR or PTX text, options, compiler version, target); see
`cache_key`. An entry is one file `<key[:2]>/<key>.kernel`: a JSON header line (metadata, the
payload's length and sha256) followed by the payload (PTX text or a cubin).

Writers write a temporary file in the same directory and `os.replace` it onto the entry, which
is atomic on POSIX: a reader sees the old entry, the new one, or none, never a torn file. Two
writers of one key write the same bytes, so whichever lands last is right. A reader that finds
a file it cannot verify (an older format, a disk-full truncation) treats it as a miss.

The directory is `$TAWA_CACHE_DIR`, else `$XDG_CACHE_HOME/tawa-xdsl`, else `~/.cache/tawa-xdsl`.
A directory that cannot be read or written (a file in its place, no permission, a full disk)
costs one warning per directory and the cache is bypassed: never a crash.

`tawa_xdsl.compiler.compile_cached` keeps compiled kernels here (every launch path compiles
through it). The compiler version in every key includes a hash of the package's own sources,
so an edited compiler never reads a stale entry.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

CACHE_FORMAT = 1
DEFAULT_TARGET = "sm_90a"


@functools.cache
def compiler_version() -> str:
    """tawa-xdsl's version and source hash with xDSL's version, read without importing either's
    heavy modules."""
    from tawa_xdsl.version import __version__

    try:
        xdsl_version = metadata.version("xdsl")
    except metadata.PackageNotFoundError:
        xdsl_version = "none"
    return (
        f"tawa-xdsl {__version__} ({source_hash()[:16]}); xdsl {xdsl_version}; "
        f"cache format {CACHE_FORMAT}"
    )


def source_hash() -> str:
    """sha256 over the package's Python sources (path and bytes of each, in path order)."""
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def cache_key(
    source: str | bytes,
    options: Mapping[str, Any] | None = None,
    *,
    target: str = DEFAULT_TARGET,
    version: str | None = None,
) -> str:
    """The hex sha256 naming the compiled form of `source` under `options` for `target`.

    Options are serialized as sorted JSON, so their order does not matter; values must be
    JSON-representable (str() is used for anything else).
    """
    text = source.encode() if isinstance(source, str) else bytes(source)
    record = {
        "source": hashlib.sha256(text).hexdigest(),
        "options": dict(options or {}),
        "compiler": compiler_version() if version is None else version,
        "target": target,
    }
    canonical = json.dumps(record, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def default_cache_dir() -> Path:
    if "TAWA_CACHE_DIR" in os.environ:
        return Path(os.environ["TAWA_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tawa-xdsl"


@dataclass(frozen=True)
class CacheEntry:
    """A cached compiled kernel: its payload bytes and the metadata stored with it."""

    payload: bytes
    meta: dict[str, Any]


class KernelCache:
    """Compiled kernels on disk by `cache_key`."""

    def __init__(self, root: str | os.PathLike[str] | None = None):
        self.root = Path(root) if root is not None else default_cache_dir()

    def path(self, key: str) -> Path:
        if len(key) < 8 or not all(c in "0123456789abcdef" for c in key):
            raise ValueError(f"cache key must be a hex digest, got {key!r}")
        return self.root / key[:2] / f"{key}.kernel"

    def get(self, key: str) -> CacheEntry | None:
        """The entry for `key`, or None if absent or unreadable."""
        try:
            data = self.path(key).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            warn_unusable(self.root, error)
            return None
        return decode_entry(data)

    def put(self, key: str, payload: bytes, meta: Mapping[str, Any] | None = None) -> Path | None:
        """Store atomically (temp file in the same directory, then os.replace); None, with one
        warning per directory, when the directory cannot be written."""
        path = self.path(key)
        data = encode_entry(payload, dict(meta or {}))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=path.parent)
        except OSError as error:
            warn_unusable(self.root, error)
            return None
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, path)
        except OSError as error:
            Path(temp).unlink(missing_ok=True)
            warn_unusable(self.root, error)
            return None
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        return path

    def get_or_build(
        self, key: str, build: Callable[[], tuple[bytes, Mapping[str, Any]]]
    ) -> CacheEntry:
        """The cached entry, or `build()`'s (payload, meta) stored and returned."""
        entry = self.get(key)
        STATS.count(entry is not None)
        if entry is None:
            payload, meta = build()
            self.put(key, payload, meta)
            entry = CacheEntry(bytes(payload), dict(meta))
        return entry

    def clear(self) -> None:
        """Remove every entry (leaves the directories)."""
        for path in self.root.glob("*/*.kernel"):
            path.unlink(missing_ok=True)


WARNED: set[str] = set()


def warn_unusable(root: Path, error: OSError) -> None:
    """One RuntimeWarning per cache directory that cannot be used."""
    if str(root) in WARNED:
        return
    WARNED.add(str(root))
    reason = error.strerror or type(error).__name__
    warnings.warn(
        f"tawa-xdsl: kernel cache {root} is unusable ({reason}); compiling without it "
        "(set TAWA_CACHE_DIR to a writable directory)",
        RuntimeWarning,
        stacklevel=3,
    )


@dataclass
class CacheStats:
    """Hits and misses of `get_or_build` in this process (tests and tools read them)."""

    hits: int = 0
    misses: int = 0

    def count(self, hit: bool) -> None:
        if hit:
            self.hits += 1
        else:
            self.misses += 1


STATS = CacheStats()


def encode_entry(payload: bytes, meta: dict[str, Any]) -> bytes:
    header = {
        "format": CACHE_FORMAT,
        "length": len(payload),
        "sha256": hashlib.sha256(payload).hexdigest(),
        "meta": meta,
    }
    return json.dumps(header, sort_keys=True, default=str).encode() + b"\n" + bytes(payload)


def decode_entry(data: bytes) -> CacheEntry | None:
    """The entry in `data`, or None when the header or the payload does not check out."""
    line, newline, payload = data.partition(b"\n")
    if not newline:
        return None
    try:
        header = json.loads(line)
    except ValueError:
        return None
    if not isinstance(header, dict) or header.get("format") != CACHE_FORMAT:
        return None
    if header.get("length") != len(payload):
        return None
    if header.get("sha256") != hashlib.sha256(payload).hexdigest():
        return None
    return CacheEntry(payload, dict(header.get("meta") or {}))
