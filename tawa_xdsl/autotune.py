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
torch, and it refuses in one line (`NoTimerError`) without a GPU. Configs are timed in
`rounds` rounds (default 3), each round in an order rotated by a third of the list, and each
config keeps its median round: on a power-capped GPU the first kernel timed after a pause runs
at a higher clock (up to 12% on the H200, bench/NOTES.md round 19), which a single pass in list
order credits to the first config.

Triton's conventions hold: `Config(kwargs, num_warps=, num_stages=, num_ctas=, maxnreg=,
pre_hook=)` (`num_warps`, `num_ctas`, `maxnreg` kept as hints that choose nothing, see `Config`;
a pre-hook gets every argument by name, constexprs of the config included, before each launch
of that config: it may set `desc.block_shape`); `autotune(configs, key,
prune_configs_by={"early_config_prune": f, "perf_model": m, "top_k": k}, reset_to_zero=[...],
restore_value=[...])`, the last two naming tensor arguments zeroed before, or restored after,
each timed launch. `Autotuner.tune(key, run)` is the same search for callers that launch kernels
themselves (bench/gemm.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import sys
import types
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tawa_xdsl.compiler import options_from_launch

Timer = Callable[[Callable[[], None]], float]


class NoTimerError(RuntimeError):
    """Autotuning needs a GPU to time configs on, and none is usable."""


class Config:
    """One point of the search: constexpr values and launch options (an option left out or
    None takes the compiler's default).

    Triton's `num_warps`, `num_ctas` and `maxnreg` are accepted so that Triton configs carry
    over, and kept as `hints`, but they choose nothing: a tawa kernel's warps follow from
    `num_consumer_groups`, it runs one CTA per program, and its registers are `registers=`.
    They are not launch options (a launch given one is refused, `compiler.unknown_option`).
    `pre_hook` is called with every argument by name before each launch of this config."""

    def __init__(
        self,
        kwargs: Mapping[str, Any] | None = None,
        num_warps: int | None = None,
        num_ctas: int | None = None,
        maxnreg: int | None = None,
        pre_hook: Callable[[dict[str, Any]], None] | None = None,
        **options: Any,
    ):
        self.kwargs = dict(kwargs or {})
        self.num_warps, self.num_ctas, self.maxnreg = num_warps, num_ctas, maxnreg
        given = {"num_warps": num_warps, "num_ctas": num_ctas, "maxnreg": maxnreg}
        self.hints = {k: v for k, v in given.items() if v is not None}
        self.pre_hook = pre_hook
        self.launch = {k: v for k, v in options.items() if v is not None}
        self.compile_options = options_from_launch(self.launch)  # refuses unknown options

    @property
    def num_stages(self) -> int | None:
        """Triton's attribute (pruning functions read it): the ring depth, None for the default."""
        return self.launch.get("num_stages")

    def options(self) -> dict[str, Any]:
        """The launch options this config sets."""
        return dict(self.launch)

    def all_kwargs(self) -> dict[str, Any]:
        """Constexprs and options, as keyword arguments of a launch."""
        return {**dict(self.kwargs), **self.options()}

    def to_json(self) -> dict[str, Any]:
        """Constexprs, options and hints (the pre-hook, code, is not data)."""
        return {"kwargs": dict(self.kwargs), **self.options(), **self.hints}

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
        parts += [f"{k}={v}" for k, v in {**self.options(), **self.hints}.items()]
        return ", ".join(parts)


def default_timer(run: Callable[[], None]) -> float:
    """Median milliseconds of `run` on the GPU (triton.testing.do_bench, else CUDA events)."""
    from tawa_xdsl.runtime import gpu_available

    if not gpu_available():
        raise NoTimerError(
            "autotune: timing configs needs a usable GPU and none was found; pass timer=, or "
            "launch the kernel with one config's keyword arguments"
        )
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
        prune_configs_by: Mapping[str, Any] | None = None,
        reset_to_zero: Sequence[str] = (),
        restore_value: Sequence[str] = (),
        rounds: int = 3,
    ):
        if not configs:
            raise ValueError("autotune needs at least one config")
        if rounds < 1:
            raise ValueError(f"autotune: rounds must be at least 1, got {rounds}")
        unknown = set(prune_configs_by or {}) - {"early_config_prune", "perf_model", "top_k"}
        if unknown:
            raise ValueError(
                f"autotune: prune_configs_by takes early_config_prune, perf_model and top_k; "
                f"got {', '.join(sorted(unknown))}"
            )
        self.prune_configs_by = dict(prune_configs_by or {})
        self.reset_to_zero = list(reset_to_zero)
        self.restore_value = list(restore_value)
        self.fn = fn
        self.configs = list(configs)
        self.key = list(key)
        self.timer = timer or default_timer
        self.rounds = rounds
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

    def tune(
        self,
        key: tuple[Any, ...],
        run: Callable[[Config], Callable[[], None]],
        configs: Sequence[Config] | None = None,
    ) -> Config:
        """The best config for `key`: cached (memory, then disk), else timed now. `run(config)`
        prepares a launcher for that config (compiling it); errors skip the config. `configs`
        are the candidates (default: all; `pruned` gives Triton's pruning)."""
        if key in self.best:
            return self.best[key]
        cached = self._load(key)
        if cached is not None:
            self.best[key] = self.with_hook(cached)
            return self.best[key]
        candidates = list(configs) if configs is not None else self.configs
        timings = self._time(candidates, run)
        best = min(candidates, key=lambda c: timings[c])
        if math.isinf(timings[best]):
            raise RuntimeError(f"autotune: no config of {self._name()} ran for key {key}")
        self.best[key], self.timings[key] = best, timings
        self._store(key, best, timings)
        return best

    def _time(
        self, candidates: list[Config], run: Callable[[Config], Callable[[], None]]
    ) -> dict[Config, float]:
        """Each candidate's median milliseconds over `rounds` rounds, round r starting r / rounds
        of the way down the list; inf for a config that fails to prepare or to run."""
        launchers: dict[Config, Callable[[], None]] = {}
        timings: dict[Config, float] = {}
        for config in candidates:
            try:
                launchers[config] = run(config)
            except Exception:  # noqa: BLE001 -- a config that cannot run is not a winner
                timings[config] = math.inf
        times: dict[Config, list[float]] = {config: [] for config in launchers}
        order = list(launchers)
        for r in range(self.rounds):
            shift = r * len(order) // self.rounds
            for config in order[shift:] + order[:shift]:
                if config in timings:
                    continue
                try:
                    times[config].append(float(self.timer(launchers[config])))
                except NoTimerError:
                    raise
                except Exception:  # noqa: BLE001 -- a config that cannot run is not a winner
                    timings[config] = math.inf
        for config, measured in times.items():
            timings.setdefault(config, statistics.median(measured))
        return timings

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

    def with_hook(self, config: Config) -> Config:
        """`config` with the pre-hook of the equal config in the list (JSON carries none)."""
        return next((c for c in self.configs if c == config), config)

    def pruned(self, arguments: Mapping[str, Any]) -> list[Config]:
        """The configs left by `prune_configs_by`: `early_config_prune(configs, named_args)`,
        then the `top_k` (a count, or a fraction of the list) best by `perf_model`."""
        configs = list(self.configs)
        early = self.prune_configs_by.get("early_config_prune")
        if early is not None:
            configs = list(early(configs, dict(arguments)))
        model = self.prune_configs_by.get("perf_model")
        top_k = self.prune_configs_by.get("top_k")
        if model is not None and top_k is not None:
            count = int(top_k * len(configs)) if isinstance(top_k, float) else int(top_k)
            estimate = {c: float(model(**{**arguments, **c.all_kwargs()})) for c in configs}
            configs = sorted(configs, key=lambda c: estimate[c])[: max(count, 1)]
        if not configs:
            raise RuntimeError(f"autotune: prune_configs_by left no config of {self._name()}")
        return configs

    def launch_config(
        self, config: Config, args: Sequence[Any], kwargs: Mapping[str, Any], grid: Any
    ) -> Any:
        """One launch with `config`, its pre-hook first."""
        merged = {**kwargs, **config.all_kwargs()}
        if config.pre_hook is not None:
            config.pre_hook({**self._arguments(args, kwargs), **dict(config.kwargs)})
        return self.fn.run(*args, grid=grid, **merged)

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        """Launch with the best config for these arguments (tuning first if needed)."""
        arguments = self._arguments(args, kwargs)
        key = self.key_of(arguments)

        def prepare(config: Config) -> Callable[[], None]:
            def timed() -> None:
                saved = {n: snapshot(arguments[n]) for n in self.restore_value}
                for name in self.reset_to_zero:
                    fill_zero(arguments[name])
                self.launch_config(config, args, kwargs, grid)
                for name, copy in saved.items():
                    restore(arguments[name], copy)

            return timed

        if key not in self.best:
            best = self.tune(key, prepare, self.pruned(arguments))
        else:
            best = self.best[key]
        return self.launch_config(best, args, kwargs, grid)


def autotune(
    configs: Sequence[Config],
    key: Sequence[str],
    timer: Timer | None = None,
    cache_dir: str | Path | None = None,
    use_disk: bool = True,
    prune_configs_by: Mapping[str, Any] | None = None,
    reset_to_zero: Sequence[str] = (),
    restore_value: Sequence[str] = (),
    rounds: int = 3,
) -> Callable[[Any], Autotuner]:
    """Decorate a `@jit` kernel: `@autotune(configs=[...], key=["M", "N", "K"])`."""

    def wrap(fn: Any) -> Autotuner:
        return Autotuner(
            fn, configs, key, timer=timer, cache_dir=cache_dir, use_disk=use_disk,
            prune_configs_by=prune_configs_by, reset_to_zero=reset_to_zero,
            restore_value=restore_value, rounds=rounds,
        )  # fmt: skip

    return wrap


def tensor_of(value: Any) -> Any:
    """The tensor behind an argument (a descriptor's base, or the argument itself)."""
    return value.base if hasattr(value, "block_shape") else value


def fill_zero(value: Any) -> None:
    """Zero a tensor argument in place (torch tensors, numpy arrays, descriptors over them)."""
    tensor = tensor_of(value)
    if hasattr(tensor, "zero_"):
        tensor.zero_()
    else:
        tensor[...] = 0


def snapshot(value: Any) -> Any:
    tensor = tensor_of(value)
    return tensor.clone() if hasattr(tensor, "clone") else tensor.copy()


def restore(value: Any, saved: Any) -> None:
    tensor = tensor_of(value)
    if hasattr(tensor, "copy_"):
        tensor.copy_(saved)
    else:
        tensor[...] = saved


class _CallableModule(types.ModuleType):
    """`tawa_xdsl.autotune(...)` works although it is also this module's name (as `jit`)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return autotune(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
