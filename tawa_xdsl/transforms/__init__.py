"""The passes of tawa-xdsl, one module each, named after the pass.

`get_all_passes()` maps each pass name to a factory that imports it lazily, as xDSL's own
registry does, so that starting `tawa-opt` does not import every pass.
"""

from collections.abc import Callable

from xdsl.passes import ModulePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    return {}
