"""Fragment layouts: which thread and which register of a warpgroup holds which tile element.

One layout object answers every question about a distributed tile (as Mosaic GPU's
`TiledLayout` does): whether a shape fits it, how many values and 32-bit registers a thread
holds, where value `i` of thread `t` sits in the tile (`coords`) and the inverse (`owner`).
The `!nvgpu.fragment` type's verifier, the lowering, the PTX printer and the interpreters all
ask these objects; a property test checks that each layout covers its tile exactly once.

Every position splits into a per-thread *origin* and a per-value *offset*:
`coords(t, i) = thread_origin(t) + value_offset(i)`. The origin is written once against
`IndexArith`, so the same formula runs on Python ints (`coords`) and on PTX registers (the
printer passes an arithmetic that emits `shr`/`and`/`add` instructions).

Thread `t` of a warpgroup (0..127) is warp `w = t >> 5`, lane `l = t & 31`. Every 64 rows of a
tile form one *block*, laid out identically; value indices continue block after block.
PTX ISA: "Matrix fragments for wgmma.mma_async m64nNk16" (register fragment figures, D and A).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import auto
from typing import Protocol, TypeVar

from xdsl.utils.str_enum import StrEnum

from tawa_xdsl.dialects.nvgpu.hardware import (
    MAX_WGMMA_N,
    WARP_THREADS,
    WARPGROUP_ROWS,
    WARPGROUP_THREADS,
)

BLOCK_ROWS = WARPGROUP_ROWS

T = TypeVar("T")


class FragmentLayout(StrEnum):
    """The name of a fragment layout, as `!nvgpu.fragment<name, ...>` spells it."""

    WGMMA_ACC = auto()
    WGMMA_ROW = auto()
    WGMMA_OPERAND_A = auto()
    WGMMA_OPERAND_A8 = auto()
    WGMMA_COL = auto()


class IndexArith(Protocol[T]):
    """The integer operations a thread origin needs, on ints or on symbolic registers."""

    def shr(self, x: T, bits: int) -> T: ...

    def shl(self, x: T, bits: int) -> T: ...

    def mask(self, x: T, bits: int) -> T: ...

    def add(self, x: T, y: T) -> T: ...


class IntArith:
    """`IndexArith` on Python ints."""

    def shr(self, x: int, bits: int) -> int:
        return x >> bits

    def shl(self, x: int, bits: int) -> int:
        return x << bits

    def mask(self, x: int, bits: int) -> int:
        return x & bits

    def add(self, x: int, y: int) -> int:
        return x + y


INT_ARITH = IntArith()


def warp_lane(thread: int) -> tuple[int, int]:
    """(warp, lane) of a warpgroup thread."""
    return thread >> 5, thread & 31


def accumulator_origin(thread: T, arith: IndexArith[T]) -> tuple[T, T]:
    """(row, col) of value 0 of `thread` in a wgmma accumulator: (16 w + (l >> 2), 2 (l & 3))."""
    lane = arith.mask(thread, 31)
    row = arith.add(arith.shl(arith.shr(thread, 5), 4), arith.shr(lane, 2))
    col = arith.shl(arith.mask(lane, 3), 1)
    return row, col


def _check_thread(thread: int) -> None:
    if not 0 <= thread < WARPGROUP_THREADS:
        raise ValueError(f"a warpgroup thread is in 0..{WARPGROUP_THREADS - 1}, got {thread}")


@dataclass(frozen=True)
class WgmmaAccLayout:
    """The m64nN accumulator of `wgmma.mma_async` (f32 D), hopper-ptx.md §4.4.

    Value i of a 64-row block is at::

        row(t, i) = 16 w + (l >> 2) + 8 ((i >> 1) & 1)
        col(t, i) = 8 (i >> 2) + 2 (l & 3) + (i & 1)

    One 8-column group of warp 0, by lane (values 0, 1 in rows 0..7; 2, 3 in rows 8..15)::

        row 0: l0  l0  l1  l1  l2  l2  l3  l3     row  8: l0  l0  l1  l1  l2  l2  l3  l3
        row 1: l4  l4  l5  l5  l6  l6  l7  l7     row  9: l4  l4  l5  l5  l6  l6  l7  l7
        ...                                       ...
        row 7: l28 l28 l29 l29 l30 l30 l31 l31    row 15: l28 l28 l29 l29 l30 l30 l31 l31

    Consecutive value pairs (2k, 2k + 1) are adjacent columns of one row: the unit of a packed
    16-bit register and of a vectorized `st.global.v2`.
    """

    name: str = "wgmma_acc"
    rank: int = 2

    def check(self, shape: tuple[int, ...]) -> None:
        """Raise ValueError unless `shape` is rows (a multiple of 64) x wgmma N."""
        rows, cols = shape
        if rows <= 0 or rows % BLOCK_ROWS:
            raise ValueError(f"rows must be a positive multiple of 64, got {rows}")
        if cols % 8 or not 8 <= cols <= MAX_WGMMA_N:
            raise ValueError(f"columns must be a multiple of 8 in 8..256 (wgmma N), got {cols}")

    def values_per_thread(self, shape: tuple[int, ...]) -> int:
        rows, cols = shape
        self._check(shape)
        return rows // BLOCK_ROWS * cols // 2

    def thread_origin(self, thread: T, arith: IndexArith[T]) -> tuple[T, T]:
        """(row, col) of value 0 of `thread`; every other value is at a constant offset."""
        return accumulator_origin(thread, arith)

    def value_offset(self, shape: tuple[int, ...], value: int) -> tuple[int, int]:
        """(row, col) of value `value` relative to the thread's origin (the same in every
        thread): (64 block + 8 ((i >> 1) & 1), 8 (i >> 2) + (i & 1))."""
        block, i = divmod(value, shape[1] // 2)
        return BLOCK_ROWS * block + 8 * ((i >> 1) & 1), 8 * (i >> 2) + (i & 1)

    def coords(self, shape: tuple[int, ...], thread: int, value: int) -> tuple[int, int]:
        """(row, col) of value `value` of thread `thread`."""
        row0, col0 = self.thread_origin(thread, INT_ARITH)
        drow, dcol = self.value_offset(shape, value)
        return row0 + drow, col0 + dcol

    def owner(self, shape: tuple[int, ...], row: int, col: int) -> tuple[int, int]:
        """(thread, value) holding element (row, col): the inverse of `coords`."""
        block, r = divmod(row, BLOCK_ROWS)
        w, rr = divmod(r, 16)
        half, q = divmod(rr, 8)
        group, c = divmod(col, 8)
        quad, low = divmod(c, 2)
        thread = 32 * w + 4 * q + quad
        value = block * (shape[1] // 2) + 4 * group + 2 * half + low
        return thread, value

    def column_pairs(self, shape: tuple[int, ...]) -> list[int]:
        """The first value of each pair of adjacent columns (0, 2, 4, ...)."""
        return list(range(0, self.values_per_thread(shape), 2))

    def block_values(self, shape: tuple[int, ...], block: int) -> range:
        """The values of 64-row block `block`: the registers of its one m64nN wgmma."""
        per_block = shape[1] // 2
        return range(block * per_block, (block + 1) * per_block)

    def values_by_column_pair(self, shape: tuple[int, ...]) -> dict[int, list[int]]:
        """The values in each pair of adjacent columns, by the pair's first column relative
        to the thread's origin (0, 8, 16, ...), in value order: a vector along the columns
        broadcast over the rows needs one two-element read per pair."""
        pairs: dict[int, list[int]] = {}
        for value in range(self.values_per_thread(shape)):
            col = self.value_offset(shape, value)[1]
            pairs.setdefault(col - col % 2, []).append(value)
        return pairs

    @staticmethod
    def _check(shape: tuple[int, ...]) -> None:
        rows, cols = shape
        if rows % BLOCK_ROWS or cols % 8 or not 8 <= cols <= 256:
            raise ValueError(
                f"wgmma_acc layout needs rows a multiple of 64 and 8 <= cols <= 256 in steps "
                f"of 8, got {rows}x{cols}"
            )


@dataclass(frozen=True)
class WgmmaRowLayout:
    """A per-row vector reduced from a wgmma accumulator (`WGMMA_ROW`).

    Per 64-row block a thread holds 2 values: row 16w + (l >> 2) (value 0) and that row + 8
    (value 1). The 4 lanes of a quad hold the same two rows, so the layout is replicated 4x::

        rows  0..7 : lanes {0..3}, {4..7}, ..., {28..31}   (value 0, warp 0)
        rows  8..15: the same lanes                         (value 1, warp 0)
    """

    name: str = "wgmma_row"
    rank: int = 1
    # The origin coordinate that is 0 exactly in the first lane of each quad: the threads
    # holding one copy of every row, which a store of the vector uses.
    copy_axis: int = 1

    def check(self, shape: tuple[int, ...]) -> None:
        """Raise ValueError unless `shape` is a positive multiple of 64 rows."""
        if shape[0] <= 0 or shape[0] % BLOCK_ROWS:
            raise ValueError(f"rows must be a positive multiple of 64, got {shape[0]}")

    def values_per_thread(self, shape: tuple[int, ...]) -> int:
        return 2 * (shape[0] // BLOCK_ROWS)

    def thread_origin(self, thread: T, arith: IndexArith[T]) -> tuple[T, T]:
        """(row, col) of the accumulator origin; a row value sits at its row, column 0 of
        the quad's first lane (col is 0 exactly in the quad's first lane)."""
        return accumulator_origin(thread, arith)

    def value_offset(self, shape: tuple[int, ...], value: int) -> int:
        """Row of value `value` relative to the thread's origin row: 64 block + 8 half."""
        block, half = divmod(value, 2)
        return BLOCK_ROWS * block + 8 * half

    def coords(self, shape: tuple[int, ...], thread: int, value: int) -> tuple[int]:
        row0, _ = self.thread_origin(thread, INT_ARITH)
        return (row0 + self.value_offset(shape, value),)

    def owner(self, shape: tuple[int, ...], row: int) -> tuple[int, int]:
        """(first thread of the quad, value) holding row `row`; lanes +1..+3 hold copies."""
        block, r = divmod(row, BLOCK_ROWS)
        w, rr = divmod(r, 16)
        half, q = divmod(rr, 8)
        return 32 * w + 4 * q, 2 * block + half

    def acc_value_row(self, acc_value: int, acc_cols: int) -> int:
        """Which row value of this layout an accumulator value (of a tile with `acc_cols`
        columns) shares its row with: the broadcast map of `fragment_broadcast_rows`."""
        block, i = divmod(acc_value, acc_cols // 2)
        return 2 * block + ((i >> 1) & 1)


def check_operand_a(shape: tuple[int, ...], k: int) -> None:
    """Raise ValueError unless `shape` is rows (a multiple of 64) x a multiple of wgmma's K."""
    rows, cols = shape
    if rows <= 0 or rows % BLOCK_ROWS:
        raise ValueError(f"rows must be a positive multiple of 64, got {rows}")
    if cols <= 0 or cols % k:
        raise ValueError(f"columns must be a positive multiple of {k} (wgmma K), got {cols}")


@dataclass(frozen=True)
class WgmmaOperandALayout:
    """wgmma's register A operand for 16-bit types (m64nNk16), hopper-ptx.md §4.4.

    Each k16 slice is laid out as an m64n16 accumulator, so value i of a 64xK tile is at the
    accumulator position of a 64xK tile: A = convert(acc) needs no data movement (the FA3
    P @ V identity). Register j of k-slice s packs values 8s + 2j (low) and 8s + 2j + 1 (high).
    The fp8 A layout differs (`WgmmaOperandA8Layout`).
    """

    name: str = "wgmma_operand_a"
    rank: int = 2

    def check(self, shape: tuple[int, ...]) -> None:
        """Raise ValueError unless `shape` is rows (a multiple of 64) x a multiple of 16."""
        check_operand_a(shape, 16)

    def values_per_thread(self, shape: tuple[int, ...]) -> int:
        return shape[0] // BLOCK_ROWS * shape[1] // 2

    def thread_origin(self, thread: T, arith: IndexArith[T]) -> tuple[T, T]:
        return accumulator_origin(thread, arith)

    def value_offset(self, shape: tuple[int, ...], value: int) -> tuple[int, int]:
        block, i = divmod(value, shape[1] // 2)
        return BLOCK_ROWS * block + 8 * ((i >> 1) & 1), 8 * (i >> 2) + (i & 1)

    def coords(self, shape: tuple[int, ...], thread: int, value: int) -> tuple[int, int]:
        row0, col0 = self.thread_origin(thread, INT_ARITH)
        drow, dcol = self.value_offset(shape, value)
        return row0 + drow, col0 + dcol

    def owner(self, shape: tuple[int, ...], row: int, col: int) -> tuple[int, int]:
        """(thread, value) holding element (row, col): the inverse of `coords`."""
        return WGMMA_ACC.owner(shape, row, col)

    def k_slice_registers(self, shape: tuple[int, ...], block: int, k_slice: int) -> range:
        """The four packed 32-bit registers that are wgmma's `{a0, a1, a2, a3}` for k16
        slice `k_slice` of 64-row block `block` (two 16-bit values per register)."""
        first = block * (shape[1] // 4) + 4 * k_slice
        return range(first, first + 4)


@dataclass(frozen=True)
class WgmmaOperandA8Layout:
    """wgmma's register A operand for 8-bit types (m64nNk32), hopper-ptx.md §4.4 (CuTe's
    `ALayout_64x32`): in k32 slice s, lane l of warp w holds rows r = 16w + (l>>2) and r + 8,
    four consecutive k from 4(l&3), and the same at k + 16. Register j of a slice packs four
    values (lowest byte first): j = 0 row r, 1 row r + 8, 2 row r at k + 16, 3 row r + 8 at
    k + 16. Unlike the 16-bit layout this is not where an accumulator keeps the same
    element (an accumulator thread holds column pairs), so converting one into it moves
    values between the lanes of a quad."""

    name: str = "wgmma_operand_a8"
    rank: int = 2

    def check(self, shape: tuple[int, ...]) -> None:
        """Raise ValueError unless `shape` is rows (a multiple of 64) x a multiple of 32."""
        check_operand_a(shape, 32)

    values_per_thread = WgmmaOperandALayout.values_per_thread  # two values per thread and row

    def thread_origin(self, thread: T, arith: IndexArith[T]) -> tuple[T, T]:
        row, pair_col = accumulator_origin(thread, arith)
        return row, arith.shl(pair_col, 1)  # 4 (l & 3): four k per thread, not two

    def value_offset(self, shape: tuple[int, ...], value: int) -> tuple[int, int]:
        block, i = divmod(value, shape[1] // 2)
        k_slice, within = divmod(i, 16)
        register, byte = divmod(within, 4)
        row = BLOCK_ROWS * block + 8 * (register & 1)
        return row, 32 * k_slice + 16 * (register >> 1) + byte

    coords = WgmmaAccLayout.coords  # the thread's origin plus the value's offset

    def owner(self, shape: tuple[int, ...], row: int, col: int) -> tuple[int, int]:
        """(thread, value) holding element (row, col): the inverse of `coords`."""
        block, r = divmod(row, BLOCK_ROWS)
        warp, within = divmod(r, 16)
        half, lane_row = divmod(within, 8)
        k_slice, k = divmod(col, 32)
        upper, k16 = divmod(k, 16)
        quad, byte = divmod(k16, 4)
        value = block * (shape[1] // 2) + 16 * k_slice + 4 * (2 * upper + half) + byte
        return 32 * warp + 4 * lane_row + quad, value

    def k_slice_registers(self, shape: tuple[int, ...], block: int, k_slice: int) -> range:
        """The four packed 32-bit registers that are wgmma's `{a0, a1, a2, a3}` for k32
        slice `k_slice` of 64-row block `block` (four 8-bit values per register)."""
        first = block * (shape[1] // 8) + 4 * k_slice
        return range(first, first + 4)

    @staticmethod
    def own_columns(cols: int) -> list[int]:
        """The accumulator column whose value each column of this layout finds in its own
        thread: within each 32, column 16 j1 + 8 q1 + 4 q0 + 2 j0 + b is accumulator column
        16 j1 + 8 j0 + 4 q1 + 2 q0 + b (the accumulator's 8-column group j, quad lane q and
        pair value b; here lane q holds four consecutive k at 4 q and 16 + 4 q). Converting
        columns so permuted moves no value between lanes."""
        if cols % 32:
            raise ValueError(f"columns must be a multiple of 32, got {cols}")
        columns = []
        for k in range(cols):
            group, k32 = divmod(k, 32)
            j1, q, j0, b = k32 >> 4, (k32 >> 2) & 3, (k32 >> 1) & 1, k32 & 1
            columns.append(32 * group + 16 * j1 + 8 * j0 + 2 * q + b)
        return columns


@dataclass(frozen=True)
class WgmmaColLayout:
    """A per-column vector reduced from a wgmma accumulator along its rows (`WGMMA_COL`).

    A thread holds the columns it holds in the accumulator: value v is column
    8 (v >> 1) + 2 (l & 3) + (v & 1), so the 8 lane rows of a warp and the 4 warps hold the
    same values (replicated 32x)::

        columns 0, 1 | 8, 9 | ...: lanes {0, 4, ..., 28} of every warp (values 0, 1 | 2, 3)
        columns 2, 3 | 10, 11 | ...: lanes {1, 5, ..., 29}
    """

    name: str = "wgmma_col"
    rank: int = 1
    # The origin coordinate that is 0 exactly in warp 0's first lane row (threads 0..3): the
    # threads holding one copy of every column, which a store of the vector uses.
    copy_axis: int = 0

    def check(self, shape: tuple[int, ...]) -> None:
        """Raise ValueError unless `shape` is a wgmma N (8..256 columns in steps of 8)."""
        if shape[0] % 8 or not 8 <= shape[0] <= MAX_WGMMA_N:
            raise ValueError(f"columns must be a multiple of 8 in 8..256 (wgmma N), got {shape[0]}")

    def values_per_thread(self, shape: tuple[int, ...]) -> int:
        return shape[0] // 4

    def thread_origin(self, thread: T, arith: IndexArith[T]) -> tuple[T, T]:
        """(row, col) of the accumulator origin; a column value sits at its column (row 0
        exactly in the first lane row of warp 0)."""
        return accumulator_origin(thread, arith)

    def value_offset(self, shape: tuple[int, ...], value: int) -> int:
        """Column of value `value` relative to the thread's origin column: 8 (v >> 1) + (v & 1)."""
        return 8 * (value >> 1) + (value & 1)

    def coords(self, shape: tuple[int, ...], thread: int, value: int) -> tuple[int]:
        _, col0 = self.thread_origin(thread, INT_ARITH)
        return (col0 + self.value_offset(shape, value),)

    def owner(self, shape: tuple[int, ...], col: int) -> tuple[int, int]:
        """(the thread of warp 0, lane row 0, value) holding column `col`; 31 others copy it."""
        group, c = divmod(col, 8)
        return c // 2, 2 * group + c % 2

    def copy_lane_masks(self) -> tuple[int, ...]:
        """The lane XOR masks between threads of a warp holding the same columns (the lane
        bits the origin column does not depend on: 4, 8, 16): a butterfly over them combines
        a warp's lane rows."""
        col0 = self.thread_origin(0, INT_ARITH)[1]
        lane_bits = (1 << bit for bit in range((WARP_THREADS - 1).bit_length()))
        return tuple(m for m in lane_bits if self.thread_origin(m, INT_ARITH)[1] == col0)

    def acc_value_column(self, acc_value: int, acc_cols: int) -> int:
        """Which column value an accumulator value (of a tile with `acc_cols` columns) shares
        its column with: the broadcast map of `fragment_broadcast_columns`."""
        i = acc_value % (acc_cols // 2)
        return 2 * (i >> 2) + (i & 1)


WGMMA_ACC = WgmmaAccLayout()
WGMMA_ROW = WgmmaRowLayout()
WGMMA_OPERAND_A = WgmmaOperandALayout()
WGMMA_OPERAND_A8 = WgmmaOperandA8Layout()
WGMMA_COL = WgmmaColLayout()

Layout = (
    WgmmaAccLayout | WgmmaRowLayout | WgmmaOperandALayout | WgmmaOperandA8Layout | WgmmaColLayout
)
LAYOUTS: dict[FragmentLayout, Layout] = {
    FragmentLayout.WGMMA_ACC: WGMMA_ACC,
    FragmentLayout.WGMMA_ROW: WGMMA_ROW,
    FragmentLayout.WGMMA_OPERAND_A: WGMMA_OPERAND_A,
    FragmentLayout.WGMMA_OPERAND_A8: WGMMA_OPERAND_A8,
    FragmentLayout.WGMMA_COL: WGMMA_COL,
}


def layout_of(kind: FragmentLayout) -> Layout:
    """The layout object of a fragment layout name."""
    return LAYOUTS[kind]


def registers_per_thread(values: int, element_bits: int) -> int:
    """32-bit registers holding `values` elements of `element_bits` bits, packed."""
    return -(-values * element_bits // 32)


def column_gather(
    layout: Layout,
    source_shape: tuple[int, int],
    shape: tuple[int, int],
    sources: list[int],
    columns: list[int],
    source_layout: Layout | None = None,
) -> list[tuple[int, int]]:
    """The register moves of a column gather: element (r, j) of a `shape` fragment in `layout`
    is element (r, columns[j]) of fragment `sources[j]` (all of `source_shape`, the same rows,
    in `source_layout`, by default `layout`). Returns, for each value of the result, the
    (source, value) it copies, the same in every thread; ValueError when some element lives
    in another thread (in the accumulator layout a column keeps its threads only where it
    moves by a multiple of 8) or thread-dependent registers."""
    source_layout = source_layout or layout
    hint = " (a column may move only by a multiple of 8)" if source_layout is layout else ""
    source_layout.check(source_shape)
    layout.check(shape)
    if shape[0] != source_shape[0] or len(columns) != shape[1] or len(sources) != shape[1]:
        raise ValueError(f"a gather into {shape} keeps the {source_shape[0]} rows, one column each")
    plan: list[tuple[int, int]] = []
    for value in range(layout.values_per_thread(shape)):
        moves = set()
        for thread in range(WARPGROUP_THREADS):
            row, col = layout.coords(shape, thread, value)
            owner, source_value = source_layout.owner(source_shape, row, columns[col])
            if owner != thread:
                raise ValueError(
                    f"column {col} would come from column {columns[col]}, held by other threads"
                    + hint
                )
            moves.add((sources[col], source_value))
        if len(moves) != 1:
            raise ValueError(f"value {value} would come from different registers per thread")
        plan.append(moves.pop())
    return plan
