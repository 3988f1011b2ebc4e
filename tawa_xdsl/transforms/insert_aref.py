"""`insert-aref`: turn every producer -> consumer edge of a partitioned kernel into an aref.

Each `tile.load` whose tile the consumer uses is published through a ring: the producer
`aref.put`s the loaded tiles, the consumer `aref.get`s them (every consumer use is rewired to
the get's results) and `aref.consumed`s the slot after the last use in the get's block. Loads
of one block that feed the same `tile.dot` (through reshape/trans/convert/broadcast) share one
tuple ring. Groups of loads in disjoint blocks with the same payload types share one ring
(two K loops in sequence): the use counter simply continues; a block never shares with a
block it encloses (a tile loaded before a loop may be held across it). The use counter of a
ring is an i32 that starts at 0 in the kernel and is carried through every enclosing
`scf.for` as an extra iter_arg and out of every enclosing `scf.if` as an extra result (role
`both`; the branch that does not use the ring yields it unchanged), so each side counts 0, 1,
2, ... in program order, across sequential loops, nested loops, loops under uniform
conditions and persistent tile loops, and zero-trip loops need no care.

Every ring is created with one slot: `ring-depth` decides the depth (the one place it is set).

No options. Refused: a kernel that was not partitioned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import ModuleOp, i32
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tawa_xdsl.dialects import aref, tile
from tawa_xdsl.transforms.ws_utils import (
    BOTH,
    CONSUMER,
    LAYOUT_OPS,
    PRODUCER,
    add_iter_args,
    ancestor_in,
    error,
    find_kernel,
    require_role,
    role_of,
    set_yield_operand,
    with_role,
)

PASS = "insert-aref"


@dataclass
class _Site:
    """One use of a ring: the loads it publishes and the put/get/consumed that move them."""

    loads: list[tile.LoadOp]
    ring: int = -1
    put: aref.PutOp | None = None
    get: aref.GetOp | None = None
    consumed: aref.ConsumedOp | None = None

    @property
    def block(self) -> Block:
        block = self.loads[0].parent_block()
        assert block is not None
        return block


@dataclass
class _Ring:
    payload: tuple[object, ...]
    sites: list[_Site] = field(default_factory=list)
    create: aref.CreateOp | None = None


def _dots_fed(load: tile.LoadOp) -> set[tile.DotOp]:
    dots: set[tile.DotOp] = set()
    frontier: list[SSAValue] = [load.result]
    while frontier:
        value = frontier.pop()
        for use in value.uses:
            user = use.operation
            if isinstance(user, tile.DotOp) and use.index in (0, 1):
                dots.add(user)
            elif isinstance(user, LAYOUT_OPS):
                frontier.append(user.results[0])
    return dots


def _group_loads(loads: Sequence[tile.LoadOp]) -> list[_Site]:
    """Loads of one block feeding one dot form one site (union-find over shared dots)."""
    parent = {load: load for load in loads}

    def find(x: tile.LoadOp) -> tile.LoadOp:
        while parent[x] is not x:
            x = parent[x]
        return x

    owner: dict[tuple[Block | None, tile.DotOp], tile.LoadOp] = {}
    for load in loads:
        for dot in _dots_fed(load):
            key = (load.parent_block(), dot)
            if key in owner:
                parent[find(load)] = find(owner[key])
            else:
                owner[key] = load
    groups: dict[tile.LoadOp, list[tile.LoadOp]] = {}
    for load in loads:  # loads are in program order, so each group is too
        groups.setdefault(find(load), []).append(load)
    return [_Site(group) for group in groups.values()]


def _nested(outer: Block, inner: Block) -> bool:
    """Whether `inner` is `outer` or lies inside one of `outer`'s ops."""
    block: Block | None = inner
    while block is not None:
        if block is outer:
            return True
        parent = block.parent_op()
        block = parent.parent_block() if parent is not None else None
    return False


def _assign_rings(sites: list[_Site]) -> list[_Ring]:
    """Sites with the same payload types share a ring, unless one's block is or encloses
    the other's: a tile loaded outside a loop (attention's Q) is held across the loop, so a
    loop's loads of the same type (K when BLOCK_N == BLOCK_M) must not queue behind it."""
    rings: list[_Ring] = []
    for site in sites:
        payload = tuple(load.result.type for load in site.loads)
        shared = [
            index
            for index, ring in enumerate(rings)
            if ring.payload == payload
            and not any(
                _nested(s.block, site.block) or _nested(site.block, s.block) for s in ring.sites
            )
        ]
        if not shared:
            shared = [len(rings)]
            rings.append(_Ring(payload))
        rings[shared[0]].sites.append(site)
        site.ring = shared[0]
    return rings


def _views(get: aref.GetOp) -> list[SSAValue]:
    """The get's results and the layout views of them: the slot is read until their last use."""
    views: list[SSAValue] = list(get.values)
    for value in views:
        views.extend(
            use.operation.results[0] for use in value.uses if isinstance(use.operation, LAYOUT_OPS)
        )
    return views


def _ring_name(site: _Site) -> str:
    hints = [load.result.name_hint for load in site.loads]
    return "_".join(h for h in hints if h) + "_ring" if all(hints) else "ring"


def _rewire(site: _Site, ring: SSAValue, placeholder: SSAValue) -> None:
    """Put after the last load, get right after it, consumed after the last use."""
    block = site.block
    last = site.loads[-1]
    put = with_role(aref.PutOp(ring, placeholder, [ld.result for ld in site.loads]), PRODUCER)
    get = with_role(aref.GetOp(ring, placeholder), CONSUMER)
    for load, value in zip(site.loads, get.values, strict=True):
        value.name_hint = load.result.name_hint
        load.result.replace_uses_with_if(value, lambda use: use.operation is not put)
    # Consumer ops between the first and the last load (using an earlier load of the group)
    # move behind the get so the get's results dominate them.
    movers: list[Operation] = []
    op = site.loads[0].next_op if len(site.loads) > 1 else None
    while op is not None and op is not last:
        if role_of(op) == CONSUMER:
            movers.append(op)
        op = op.next_op
    Rewriter.insert_op([put, get], InsertPoint.after(last))
    anchor: Operation = get
    for mover in movers:
        mover.detach()
        Rewriter.insert_op(mover, InsertPoint.after(anchor))
        anchor = mover
    users = [ancestor_in(use.operation, block) for value in _views(get) for use in value.uses]
    last_user = max((u for u in users if u is not None), key=block.get_operation_index, default=get)
    if isinstance(last_user, scf.YieldOp):
        raise error(last_user, PASS, "a loaded tile escapes its block through 'scf.yield'")
    consumed = with_role(aref.ConsumedOp(ring, placeholder), CONSUMER)
    Rewriter.insert_op(consumed, InsertPoint.after(last_user))
    site.put, site.get, site.consumed = put, get, consumed


def _thread_counters(
    block: Block,
    counters: dict[int, SSAValue],
    site_of_put: dict[aref.PutOp, _Site],
    rings_in: dict[Operation, set[int]],
    one: SSAValue,
) -> dict[int, SSAValue]:
    """Give each site of `block` (and of the loops in it) its use index; returns the counters
    after the block."""
    counters = dict(counters)
    for op in list(block.ops):
        if isinstance(op, aref.PutOp) and op in site_of_put:
            site = site_of_put[op]
            index = counters[site.ring]
            for user in (site.put, site.get, site.consumed):
                assert user is not None
                user.operands = [user.operands[0], index, *user.operands[2:]]
            step = with_role(arith.AddiOp(index, one), BOTH)
            assert site.get is not None
            Rewriter.insert_op(step, InsertPoint.after(site.get))
            counters[site.ring] = step.result
        elif isinstance(op, scf.IfOp) and rings_in.get(op):
            rings = sorted(rings_in[op])
            after = [
                _thread_counters(block, counters, site_of_put, rings_in, one)
                for block in _branch_blocks(op)
            ]
            results = _add_branch_results(op, [[c[r] for r in rings] for c in after])
            for ring, result in zip(rings, results, strict=True):
                result.name_hint = "i"
                counters[ring] = result
        elif isinstance(op, scf.ForOp) and rings_in.get(op):
            rings = sorted(rings_in[op])
            carried = len(op.iter_args)
            loop, args = add_iter_args(op, [counters[r] for r in rings])
            for arg in args:
                arg.name_hint = "i"
            inner = _thread_counters(
                loop.body.block,
                counters | dict(zip(rings, args, strict=True)),
                site_of_put,
                rings_in,
                one,
            )
            for k, ring in enumerate(rings):
                set_yield_operand(loop, carried + k, inner[ring])
                counters[ring] = loop.results[carried + k]
                loop.results[carried + k].name_hint = "i"
    return counters


def _branch_blocks(branch: scf.IfOp) -> list[Block]:
    """The then and else blocks of `branch` (an empty else region gets a block that only
    yields, so both branches can yield the counters)."""
    if not branch.false_region.blocks:
        branch.false_region.add_block(Block([with_role(scf.YieldOp(), role_of(branch))]))
    return [branch.true_region.block, branch.false_region.block]


def _add_branch_results(branch: scf.IfOp, yields: Sequence[Sequence[SSAValue]]) -> list[SSAValue]:
    """Rebuild `branch` with extra results, yielded by each region as in `yields` (then,
    else); returns the new results."""
    for block, extra in zip(_branch_blocks(branch), yields, strict=True):
        old = block.last_op
        assert isinstance(old, scf.YieldOp)
        new_yield = scf.YieldOp(*old.operands, *extra)
        new_yield.attributes.update(old.attributes)
        Rewriter.replace_op(old, new_yield)
    types = [*branch.result_types, *(v.type for v in yields[0])]
    regions = [Rewriter.move_region_contents_to_new_regions(r) for r in branch.regions]
    new = scf.IfOp(branch.cond, types, *regions)
    new.attributes.update(branch.attributes)
    new.location = branch.location
    Rewriter.insert_op(new, InsertPoint.before(branch))
    for old_result, new_result in zip(branch.results, new.results, strict=False):
        new_result.name_hint = old_result.name_hint
    Rewriter.replace_op(branch, [], list(new.results[: len(branch.results)]))
    return list(new.results[len(branch.results) :])


def insert_arefs(kernel: func.FuncOp) -> None:
    for op in kernel.body.walk():
        require_role(op, PASS)
    loads = [op for op in kernel.body.walk() if isinstance(op, tile.LoadOp) and op.result.uses]
    sites = _group_loads(loads)
    rings = _assign_rings(sites)

    entry = kernel.body.block
    first = entry.first_op
    assert first is not None
    zero = with_role(arith.ConstantOp.from_int_and_width(0, i32), BOTH)
    one = with_role(arith.ConstantOp.from_int_and_width(1, i32), BOTH)
    zero.result.name_hint, one.result.name_hint = "use0", "use1"
    Rewriter.insert_op([zero, one], InsertPoint.before(first))
    for ring in rings:
        ring_type = aref.RingType(list(ring.payload), 1)  # type: ignore[arg-type]
        ring.create = with_role(aref.CreateOp(ring_type), BOTH)
        ring.create.ring.name_hint = _ring_name(ring.sites[0])
        ring.create.location = ring.sites[0].loads[0].location
        Rewriter.insert_op(ring.create, InsertPoint.before(zero))

    rings_in: dict[Operation, set[int]] = {}
    for site in sites:
        ring = rings[site.ring]
        assert ring.create is not None
        _rewire(site, ring.create.ring, zero.result)
        parent = site.block.parent_op()
        while isinstance(parent, scf.ForOp | scf.IfOp):
            rings_in.setdefault(parent, set()).add(site.ring)
            parent = parent.parent_op()
    site_of_put = {site.put: site for site in sites if site.put is not None}
    counters = {r: zero.result for r in range(len(rings))}
    _thread_counters(entry, counters, site_of_put, rings_in, one.result)


@dataclass(frozen=True)
class InsertArefPass(ModulePass):
    """Producer -> consumer edges become one-slot aref rings (no options)."""

    name = "insert-aref"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        insert_arefs(find_kernel(op, PASS))
