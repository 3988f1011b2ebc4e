"""Fragment layouts: which thread and which register of a warpgroup holds which tile element.

One `FragmentLayout` answers every question about a distributed tile (as Mosaic GPU's
`TiledLayout` does): how many values a thread holds, where value `i` of thread `t` sits in
the tile, and the inverse. The lowering, the PTX printer and the tests all use these objects;
a property test checks that each layout covers its tile exactly once.

Thread `t` of a warpgroup (0..127) is warp `w = t >> 5`, lane `l = t & 31`. Every 64 rows of a
tile form one *block*, laid out identically; value indices continue block after block.
PTX ISA: "Matrix fragments for wgmma.mma_async m64nNk16" (register fragment figures, D and A).
"""

from __future__ import annotations

from dataclasses import dataclass

WARPGROUP_THREADS = 128
BLOCK_ROWS = 64


def warp_lane(thread: int) -> tuple[int, int]:
    """(warp, lane) of a warpgroup thread."""
    return thread >> 5, thread & 31


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

    def values_per_thread(self, shape: tuple[int, ...]) -> int:
        rows, cols = shape
        self._check(shape)
        return rows // BLOCK_ROWS * cols // 2

    def coords(self, shape: tuple[int, ...], thread: int, value: int) -> tuple[int, int]:
        """(row, col) of value `value` of thread `thread`."""
        cols = shape[1]
        per_block = cols // 2
        block, i = divmod(value, per_block)
        w, lane = warp_lane(thread)
        row = BLOCK_ROWS * block + 16 * w + (lane >> 2) + 8 * ((i >> 1) & 1)
        col = 8 * (i >> 2) + 2 * (lane & 3) + (i & 1)
        return row, col

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

    def values_per_thread(self, shape: tuple[int, ...]) -> int:
        return 2 * (shape[0] // BLOCK_ROWS)

    def coords(self, shape: tuple[int, ...], thread: int, value: int) -> tuple[int]:
        block, half = divmod(value, 2)
        w, lane = warp_lane(thread)
        return (BLOCK_ROWS * block + 16 * w + (lane >> 2) + 8 * half,)

    def acc_value_row(self, acc_value: int, acc_cols: int) -> int:
        """Which row value of this layout an accumulator value (of a tile with `acc_cols`
        columns) shares its row with: the broadcast map of `fragment_broadcast_rows`."""
        block, i = divmod(acc_value, acc_cols // 2)
        return 2 * block + ((i >> 1) & 1)


@dataclass(frozen=True)
class WgmmaOperandALayout:
    """wgmma's register A operand for 16-bit types (m64nNk16), hopper-ptx.md §4.4.

    Each k16 slice is laid out as an m64n16 accumulator, so value i of a 64xK tile is at the
    accumulator position of a 64xK tile: A = convert(acc) needs no data movement (the FA3
    P @ V identity). Register j of k-slice s packs values 8s + 2j (low) and 8s + 2j + 1 (high).
    """

    name: str = "wgmma_operand_a"

    def values_per_thread(self, shape: tuple[int, ...]) -> int:
        return WGMMA_ACC.values_per_thread(shape)

    def coords(self, shape: tuple[int, ...], thread: int, value: int) -> tuple[int, int]:
        return WGMMA_ACC.coords(shape, thread, value)


WGMMA_ACC = WgmmaAccLayout()
WGMMA_ROW = WgmmaRowLayout()
WGMMA_OPERAND_A = WgmmaOperandALayout()
