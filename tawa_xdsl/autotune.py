"""`@autotune`: time a kernel's configurations on the GPU, keep the fastest per shape.

    @tawa_xdsl.autotune(
        configs=[
            Config({"BLOCK_N": 128}, num_stages=4, mma_depth=2, persistent=True),
            Config({"BLOCK_N": 256}, num_stages=3, mma_depth=1, epilogue="tma"),
        ],
        key=["M", "N", "K"],
    )
    @tawa_xdsl.jit
    def matmul_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_N: tl.constexpr, ...): ...

    matmul_kernel[grid](a_desc, b_desc, c_desc, M, N, K, BLOCK_M=128, BLOCK_K=64)

As triton.autotune: on the first launch for a new key (the values of the `key` arguments,
with the dtype of every argument that has one), each config is launched and timed, and the
fastest one runs this and every later launch with that key. A config is constexprs
(`kwargs`) plus launch options, the compiler's (`tawa_xdsl.compiler.LAUNCH_OPTIONS`:
`num_stages` = D, `mma_depth` = P, `num_consumer_groups`, `persistent`, `epilogue`,
`registers`, `pingpong`, ...); an unknown option is refused when the Config is made. A config
that fails to compile or launch is skipped. Winners are cached in memory and on disk
(`<kernel cache dir>/autotune`, keyed by kernel, key values, the config list and the compiler
version; atomic writes), so a new process reuses them without timing again.

The timer is pluggable (`timer=`): a callable taking a zero-argument launcher and returning
milliseconds; the default is `triton.testing.do_bench` (median), else CUDA events through
torch. `Autotuner.tune(key, run)` is the same search for callers that launch kernels
themselves (bench/gemm.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import types
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tawa_xdsl.compiler import options_from_launch

Timer = Callable[[Callable[[], None]], float]


class Config:
    """One point of the search: constexpr values and launch options (an option left out or
    None takes the compiler's default)."""

    def __init__(self, kwargs: Mapping[str, Any] | None = None, **options: Any):
        self.kwargs = dict(kwargs or {})
        self.launch = {k: v for k, v in options.items() if v is not None}
        self.compile_options = options_from_launch(self.launch)  # refuses unknown options

    def options(self) -> dict[str, Any]:
        """The launch options this config sets."""
        return dict(self.launch)

    def all_kwargs(self) -> dict[str, Any]:
        """Constexprs and options, as keyword arguments of a launch."""
        return {**dict(self.kwargs), **self.options()}

    def to_json(self) -> dict[str, Any]:
        return {"kwargs": dict(self.kwargs), **self.options()}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Config:
        options = {k: v for k, v in data.items() if k != "kwargs"}
        return Config(dict(data.get("kwargs", {})), **options)

    def identity(self) -> str:
        """The config as canonical JSON text (tuples and lists alike): equality and hash."""
        return json.dumps(self.to_json(), sort_keys=True, default=str)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Config) and self.identity() == other.identity()

    def __hash__(self) -> int:
        return hash(self.identity())

    def __repr__(self) -> str:
        return f"Config({self})"

    def __str__(self) -> str:
        parts = [f"{k}={v}" for k, v in self.kwargs.items()]
        parts += [f"{k}={v}" for k, v in self.options().items()]
        return ", ".join(parts)


def default_timer(run: Callable[[], None]) -> float:
    """Median milliseconds of `run` on the GPU (triton.testing.do_bench, else CUDA events)."""
    try:
        from triton.testing import do_bench
    except ImportError:
        do_bench = None
    if do_bench is not None:
        return float(do_bench(run, warmup=25, rep=100, return_mode="median"))
    import torch

    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def default_autotune_dir() -> Path:
    from tawa_xdsl.runtime.cache import default_cache_dir

    return default_cache_dir() / "autotune"


class Autotuner:
    """The fastest config per key for one kernel (see the module docstring)."""

    def __init__(
        self,
        fn: Any,
        configs: Sequence[Config],
        key: Sequence[str],
        timer: Timer | None = None,
        cache_dir: str | Path | None = None,
        use_disk: bool = True,
    ):
        if not configs:
            raise ValueError("autotune needs at least one config")
        self.fn = fn
        self.configs = list(configs)
        self.key = list(key)
        self.timer = timer or default_timer
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.use_disk = use_disk
        self.best: dict[tuple[Any, ...], Config] = {}
        self.timings: dict[tuple[Any, ...], dict[Config, float]] = {}

    # ----------------------------------------------------------------------------- keys

    def _name(self) -> str:
        fn = getattr(self.fn, "fn", self.fn)
        return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"

    def key_of(self, arguments: Mapping[str, Any]) -> tuple[Any, ...]:
        """The tuning key: the `key` argument values, then every argument's dtype."""
        missing = [k for k in self.key if k not in arguments]
        if missing:
            raise TypeError(f"autotune key names unknown arguments: {', '.join(missing)}")
        dtypes = tuple(
            (name, str(value.dtype))
            for name, value in arguments.items()
            if getattr(value, "dtype", None) is not None
        )
        return (*(arguments[k] for k in self.key), *dtypes)

    def _disk_path(self, key: tuple[Any, ...]) -> Path:
        from tawa_xdsl.runtime.cache import compiler_version

        record = {
            "kernel": self._name(),
            "key": [str(k) for k in key],
            "configs": [c.to_json() for c in self.configs],
            "compiler": compiler_version(),
        }
        digest = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()
        root = self.cache_dir if self.cache_dir is not None else default_autotune_dir()
        return root / f"{digest}.json"

    def _load(self, key: tuple[Any, ...]) -> Config | None:
        if not self.use_disk:
            return None
        try:
            data = json.loads(self._disk_path(key).read_text())
            return Config.from_json(data["best"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _store(self, key: tuple[Any, ...], best: Config, timings: dict[Config, float]) -> None:
        if not self.use_disk:
            return
        import os
        import tempfile

        path = self._disk_path(key)
        data = {
            "kernel": self._name(),
            "key": [str(k) for k in key],
            "best": best.to_json(),
            "timings_ms": [[c.to_json(), t] for c, t in timings.items()],
        }
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=".autotune.", suffix=".tmp", dir=path.parent)
            try:
                with os.fdopen(fd, "w") as handle:
                    json.dump(data, handle, default=str)
                os.replace(temp, path)
            finally:
                Path(temp).unlink(missing_ok=True)
        except OSError as error:  # the winner still launches; only the disk copy is lost
            warnings.warn(
                f"autotune: {self._name()}: cannot save the winner under {path.parent}: "
                f"{error.strerror or error}; it is cached in memory only",
                stacklevel=3,
            )

    # --------------------------------------------------------------------------- search

    def tune(self, key: tuple[Any, ...], run: Callable[[Config], Callable[[], None]]) -> Config:
        """The best config for `key`: cached (memory, then disk), else timed now. `run(config)`
        prepares a launcher for that config (compiling it); errors skip the config."""
        if key in self.best:
            return self.best[key]
        cached = self._load(key)
        if cached is not None:
            self.best[key] = cached
            return cached
        timings: dict[Config, float] = {}
        for config in self.configs:
            try:
                timings[config] = float(self.timer(run(config)))
            except Exception:  # noqa: BLE001 -- a config that cannot run is not a winner
                timings[config] = math.inf
        best = min(self.configs, key=lambda c: timings[c])
        if math.isinf(timings[best]):
            raise RuntimeError(f"autotune: no config of {self._name()} ran for key {key}")
        self.best[key], self.timings[key] = best, timings
        self._store(key, best, timings)
        return best

    # ------------------------------------------------------------------------ launching

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        def launch(*args: Any, **kwargs: Any) -> Any:
            return self.run(*args, grid=grid, **kwargs)

        return launch

    def _arguments(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        import inspect

        fn = getattr(self.fn, "fn", self.fn)
        bound = inspect.signature(fn).bind_partial(*args, **kwargs)
        return dict(bound.arguments)

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        """Launch with the best config for these arguments (tuning first if needed)."""
        arguments = self._arguments(args, kwargs)
        key = self.key_of(arguments)

        def prepare(config: Config) -> Callable[[], None]:
            merged = {**kwargs, **config.all_kwargs()}
            return lambda: self.fn.run(*args, grid=grid, **merged)

        best = self.tune(key, prepare)
        return self.fn.run(*args, grid=grid, **{**kwargs, **best.all_kwargs()})


def autotune(
    configs: Sequence[Config],
    key: Sequence[str],
    timer: Timer | None = None,
    cache_dir: str | Path | None = None,
    use_disk: bool = True,
) -> Callable[[Any], Autotuner]:
    """Decorate a `@jit` kernel: `@autotune(configs=[...], key=["M", "N", "K"])`."""

    def wrap(fn: Any) -> Autotuner:
        return Autotuner(fn, configs, key, timer=timer, cache_dir=cache_dir, use_disk=use_disk)

    return wrap


class _CallableModule(types.ModuleType):
    """`tawa_xdsl.autotune(...)` works although it is also this module's name (as `jit`)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return autotune(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
