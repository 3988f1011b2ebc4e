"""Loading PTX into the current device: driver JIT with its logs kept, or nvJitLink to a cubin.

`load_ptx(text)` returns a `Module`; `module.kernel("name")` a `Kernel` that knows its
parameters (parsed from the PTX `.entry` signature), so `launch` can pack Python arguments
and reject a wrong count or type by name.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from tawa_xdsl.runtime.driver import Device, call, check, cuda_driver, require_gpu, result_name
from tawa_xdsl.runtime.errors import LaunchError, PTXLoadError

LOG_BYTES = 1 << 16
DEFAULT_SHARED_LIMIT = 48 * 1024

ENTRY = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(([^)]*)\)", re.S)
PARAM = re.compile(
    r"\.param\s+(?:\.align\s+\d+\s+)?\.([busf])(8|16|32|64)\s+"
    r"(?:\.ptr\s+(?:\.(?:global|shared|const|local)\s+)?(?:\.align\s+\d+\s+)?)?"
    r"([A-Za-z_$][\w$]*)\s*(?:\[(\d+)\])?"
)


@dataclass(frozen=True)
class Param:
    """One `.param` of a kernel entry: `.u32 K` or `.align 64 .b8 tmA[128]`."""

    name: str
    kind: str  # b, u, s or f
    bits: int
    count: int = 1

    @property
    def nbytes(self) -> int:
        return self.bits // 8 * self.count

    @property
    def is_array(self) -> bool:
        return self.count > 1

    def __str__(self) -> str:
        array = f"[{self.count}]" if self.is_array else ""
        return f".{self.kind}{self.bits} {self.name}{array}"


def parse_entries(ptx: str) -> dict[str, tuple[Param, ...]]:
    """The parameter list of every `.entry` in `ptx`, by kernel name."""
    text = re.sub(r"//[^\n]*", "", ptx)
    entries: dict[str, tuple[Param, ...]] = {}
    for match in ENTRY.finditer(text):
        params = tuple(
            Param(p.group(3), p.group(1), int(p.group(2)), int(p.group(4) or 1))
            for p in PARAM.finditer(match.group(2))
        )
        entries[match.group(1)] = params
    return entries


def ptx_bytes(ptx: str | bytes) -> bytes:
    """NUL-terminated ASCII PTX, as the driver expects."""
    data = ptx.encode("ascii") if isinstance(ptx, str) else bytes(ptx)
    return data if data.endswith(b"\0") else data + b"\0"


def decode_log(buffer: bytearray) -> str:
    return bytes(buffer).split(b"\0", 1)[0].decode("utf-8", "replace").strip()


@dataclass
class Module:
    """A loaded CUmodule, the JIT's info log, and the kernel signatures from its PTX."""

    handle: Any
    device: Device
    signatures: dict[str, tuple[Param, ...]]
    info_log: str = ""
    kernels: dict[str, Kernel] = field(default_factory=dict)

    def kernel(self, name: str) -> Kernel:
        """The entry `name`; LaunchError listing the entries if there is none."""
        if name not in self.kernels:
            known = ", ".join(self.signatures) or "(no signatures known)"
            if self.signatures and name not in self.signatures:
                raise LaunchError(f"module has no kernel {name!r}; it has: {known}")
            handle = call("cuModuleGetFunction", self.handle, name.encode())
            self.kernels[name] = Kernel(name, handle, self, self.signatures.get(name))
        return self.kernels[name]


@dataclass
class Kernel:
    """A CUfunction with its parameters and the dynamic smem limit set on it so far."""

    name: str
    handle: Any
    module: Module
    params: tuple[Param, ...] | None
    shared_limit: int = DEFAULT_SHARED_LIMIT

    def attribute(self, name: str) -> int:
        """A `CU_FUNC_ATTRIBUTE_*` value, given the part after that prefix."""
        attr = getattr(cuda_driver().CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}")
        return int(call("cuFuncGetAttribute", attr, self.handle))

    @functools.cached_property
    def max_threads(self) -> int:
        """The most threads a block may have (`.maxntid`, registers), read once."""
        return self.attribute("MAX_THREADS_PER_BLOCK")

    @property
    def registers(self) -> int:
        return self.attribute("NUM_REGS")

    def resident_blocks(self, threads: int, shared_bytes: int) -> int:
        """How many blocks of `threads` threads and `shared_bytes` of dynamic shared memory
        one SM holds at once (the driver's occupancy calculator)."""
        self.reserve_shared_memory(shared_bytes)
        return int(
            call("cuOccupancyMaxActiveBlocksPerMultiprocessor", self.handle, threads, shared_bytes)
        )

    def reserve_shared_memory(self, nbytes: int) -> None:
        """Raise the dynamic shared-memory limit to `nbytes` (needed above 48 KiB)."""
        if nbytes <= self.shared_limit:
            return
        limit = self.module.device.max_shared_memory_optin - self.attribute("SHARED_SIZE_BYTES")
        if nbytes > limit:
            raise LaunchError(
                f"kernel {self.name}: {nbytes} bytes of dynamic shared memory exceed the "
                f"{limit} this device allows per block"
            )
        attr = cuda_driver().CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        call("cuFuncSetAttribute", self.handle, attr, nbytes)
        self.shared_limit = nbytes


def load_ptx(ptx: str | bytes, *, verbose: bool = True) -> Module:
    """JIT `ptx` into the current sm_90 device; PTXLoadError carries the JIT's error log."""
    device = require_gpu()
    cu = cuda_driver()
    data = ptx_bytes(ptx)
    info, error = bytearray(LOG_BYTES), bytearray(LOG_BYTES)
    opt = cu.CUjit_option
    options = [
        opt.CU_JIT_INFO_LOG_BUFFER,
        opt.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
        opt.CU_JIT_ERROR_LOG_BUFFER,
        opt.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        opt.CU_JIT_LOG_VERBOSE,
    ]
    values = [info, LOG_BYTES, error, LOG_BYTES, int(verbose)]
    err, handle = cu.cuModuleLoadDataEx(data, len(options), options, values)
    if int(err) != 0:
        log = decode_log(error) or decode_log(info)
        first = "; ".join(log.splitlines()[:3]) or "the JIT left no log"
        raise PTXLoadError("cuModuleLoadDataEx", result_name(err), first)
    signatures = parse_entries(data[:-1].decode("ascii", "replace"))
    return Module(handle, device, signatures, decode_log(info))


def load_cubin(cubin: bytes, signatures: dict[str, tuple[Param, ...]] | None = None) -> Module:
    """Load a cubin; pass `signatures` (from `parse_entries` on its PTX) to check launches."""
    device = require_gpu()
    handle = check(cuda_driver().cuModuleLoadData(bytes(cubin)), "cuModuleLoadData")
    return Module(handle, device, dict(signatures or {}))


def link_ptx(ptx: str | bytes, arch: str = "sm_90a") -> tuple[bytes, str]:
    """PTX -> cubin in process with nvJitLink (optional dependency); returns (cubin, log)."""
    try:
        from cuda.bindings import nvjitlink
    except ImportError:  # also raised when cuda.pathfinder, which finds the library, is missing
        message = "cuda.bindings.nvjitlink not found"
        raise PTXLoadError("nvJitLink", "unavailable", message) from None
    data = ptx_bytes(ptx)
    try:
        handle = nvjitlink.create(2, [f"-arch={arch}", "-verbose"])
    except Exception as exc:  # noqa: BLE001 - a missing libnvJitLink surfaces here
        raise PTXLoadError("nvJitLinkCreate", "unavailable", str(exc)) from None
    try:
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel")
        try:
            nvjitlink.complete(handle)
        except Exception as exc:  # noqa: BLE001 - nvJitLink's own exception type varies
            log = read_nvjitlink_log(nvjitlink, handle, error=True)
            first = "; ".join(log.splitlines()[:3])
            raise PTXLoadError("nvJitLinkComplete", type(exc).__name__, first) from None
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
        return bytes(cubin), read_nvjitlink_log(nvjitlink, handle, error=False)
    finally:
        nvjitlink.destroy(handle)


def read_nvjitlink_log(nvjitlink: Any, handle: Any, error: bool) -> str:
    size_of = nvjitlink.get_error_log_size if error else nvjitlink.get_info_log_size
    read = nvjitlink.get_error_log if error else nvjitlink.get_info_log
    buffer = bytearray(size_of(handle))
    if buffer:
        read(handle, buffer)
    return decode_log(buffer)


LOADED: dict[tuple[str, int], Module] = {}
# Kernels by (PTX text, entry, device): a str caches its hash, so a launch cache's miss finds
# its kernel without hashing the PTX again.
KERNELS: dict[tuple[str | bytes, str, int], Kernel] = {}


def load_kernel(ptx: str | bytes, name: str) -> Kernel:
    """Kernel `name` of `ptx`, loading each distinct PTX text once per process and device."""
    device = require_gpu()
    found = KERNELS.get((ptx, name, device.ordinal))
    if found is not None:
        return found
    key = (hashlib.sha256(ptx_bytes(ptx)).hexdigest(), device.ordinal)
    if key not in LOADED:
        LOADED[key] = load_ptx(ptx)
    kernel = KERNELS[ptx, name, device.ordinal] = LOADED[key].kernel(name)
    return kernel
