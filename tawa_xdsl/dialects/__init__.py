"""The three tawa dialects and the context that knows them with builtin/func/arith/scf/math."""

from xdsl.context import Context


def make_context() -> Context:
    """A context with every dialect a tawa program may use loaded."""
    from xdsl.dialects.arith import Arith
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func
    from xdsl.dialects.math import Math
    from xdsl.dialects.scf import Scf

    from tawa_xdsl.dialects.aref import Aref
    from tawa_xdsl.dialects.nvgpu import Nvgpu
    from tawa_xdsl.dialects.tile import Tile

    ctx = Context()
    for dialect in (Builtin, Func, Arith, Scf, Math, Tile, Aref, Nvgpu):
        ctx.load_dialect(dialect)
    return ctx
