"""Ring proofs on disk, by protocol shape, so that a proof is found once per machine.

`certificate.prove` looks a ring up here by the `extract.shape_key` of its canonical form
(steps, counts, depth, certificate parameters; no names, locations or slot renamings) before
it asks Z3, and stores every definite verdict (proved, or a named failure; never a check the
solver gave up on). The key also holds the compiler version, whose hash covers the
verifier's sources, so an edited verifier never reads an old verdict. Entries live under
`<cache dir>/proofs/` in the kernel cache's format and with its rules (`runtime.cache`:
atomic writes; a directory that cannot be used costs one warning and the proof runs as if
nothing were cached, never a crash).
"""

from __future__ import annotations

import json
from typing import Any

from tawa_xdsl.runtime.cache import KernelCache, cache_key, default_cache_dir

KIND = "ring-proof"


def _store() -> KernelCache:
    return KernelCache(default_cache_dir() / "proofs")


def proof_key(shape: tuple) -> str:
    """The cache key of the proof of a ring of protocol shape `shape`."""
    return cache_key(repr(shape), {"kind": KIND})


def load(shape: tuple) -> dict[str, Any] | None:
    """The verdict stored for `shape` (`proved`, `failed`, `queries`), or None."""
    entry = _store().get(proof_key(shape))
    if entry is None or entry.meta.get("kind") != KIND:
        return None
    try:
        record = json.loads(entry.payload)
    except ValueError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("proved"), bool):
        return None
    return record


def save(shape: tuple, proved: bool, failed: str, queries: int) -> None:
    """Store the verdict for `shape` (silently skipped when the directory is unusable)."""
    record = {"proved": proved, "failed": failed, "queries": queries}
    _store().put(proof_key(shape), json.dumps(record).encode(), {"kind": KIND})
