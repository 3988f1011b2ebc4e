"""Hardware facts of sm_90a that the dialect, the passes and the printer share, defined once.

Section numbers refer to `reference/hopper-ptx.md`.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Operation

WARPGROUP_THREADS = 128  # 4 warps of 32 threads run one wgmma (§4.2, §5)
WARP_THREADS = 32
WARPGROUP_ROWS = 64  # rows of one wgmma instruction (m64), i.e. of one warpgroup
MAX_WGMMA_N = 256  # wgmma N is 8..256 in steps of 8 (§4.1)
MAX_MBARRIER_COUNT = 2**20 - 1  # arrival counts and tx-counts are 20-bit (§2.2)
MBARRIER_BYTES = 8  # one mbarrier is a .b64 in shared memory, 8-byte aligned

CTA_BARRIER_ID = 0  # named barrier 0 is `bar.sync 0`, the whole CTA (§6)
MAX_NAMED_BARRIER_ID = 15  # 16 named barriers per CTA, ids 0..15
# Who uses which named barrier (0 is the CTA-wide bar.sync): the producer group publishing
# register payloads, the consumers' TMA-store staging, the two ping-pong turns, and a
# consumer group whose threads read a slot into registers before one thread releases it, and
# a consumer group exchanging its warps' partials of a reduction along the rows.
PRODUCER_BARRIER_ID = 1
# one per consumer warpgroup of a group (at most 3): each waits only for its own threads
# around its own staging slots, so one warpgroup's epilogue does not hold the others' MMAs
EPILOGUE_BARRIER_IDS = (2, 7, 8)
PINGPONG_BARRIER_IDS = (3, 4, 9)  # one per consumer warpgroup taking turns (at most 3)
SLOT_READ_BARRIER_ID = 5  # a consumer group's threads, done reading a slot into registers
COLUMN_REDUCE_BARRIER_ID = 6  # a consumer group's warpgroups, around their column partials
MAX_CTA_THREADS = 1024

TMA_MAX_BOX_DIM = 256  # every box dim is in 1..256 (§3.2)
TMA_BOX_INNER_BYTES = 16  # the innermost box dim spans a multiple of 16 bytes
SWIZZLE_SPANS = (0, 32, 64, 128)  # smem swizzle modes, in bytes of one swizzled row
SWIZZLE_128B_SPAN = 128  # the swizzle TMA and wgmma use here (§3.2, §4.3)
SWIZZLE_CHUNK_BYTES = 16  # the swizzle permutes 16-byte chunks of a row
SWIZZLE_ROW_SHIFT = 7  # ... XORing chunk bits [4:6] with address bits [7:9] (§3.2)
SWIZZLE_REPEAT_ROWS = 8  # the pattern repeats every 8 rows of the span
SMEM_ALIGN = 1024  # every buffer starts on the 128B-swizzle repeat (§3.1)
SM90_MAX_SMEM_BYTES = 232448  # dynamic smem one block may use on sm_90 (227 KiB, opt-in)
SM90_SMEM_PER_SM = 233472  # shared memory of one SM (228 KiB), split among its resident CTAs
SMEM_RESERVED_PER_CTA = 1024  # what the system takes of it for each resident CTA
MAX_CTAS_PER_SM = 4  # the most CTAs a kernel may ask to share an SM (`ctas_per_sm`)

MIN_SETMAXNREG, MAX_SETMAXNREG = 24, 256  # setmaxnreg takes a multiple of 8 in 24..256 (§5)
SM_REGISTERS = 65536  # 32-bit registers of one SM, shared by the CTA's warpgroups (§5)


# The kernel attribute asking for that many CTAs to share each SM (absent: one). Set by the
# first pass and kept at every level: the budgets of registers and shared memory divide by it,
# the printer asks ptxas for it (`.minnctapersm`), a persistent launch starts that many
# programs per SM.
CTAS_PER_SM_ATTR = "tawa.ctas_per_sm"


def ctas_per_sm(kernel: Operation) -> int:
    """The CTAs `kernel` (a func.func) asks to share each SM: its `CTAS_PER_SM_ATTR`, or 1."""
    value = kernel.attributes.get(CTAS_PER_SM_ATTR)
    return value.value.data if isinstance(value, IntegerAttr) else 1


def cta_smem_limit(ctas_per_sm: int) -> int:
    """Dynamic shared memory one CTA may use when `ctas_per_sm` CTAs share an SM."""
    return min(SM90_MAX_SMEM_BYTES, SM90_SMEM_PER_SM // ctas_per_sm - SMEM_RESERVED_PER_CTA)


def smem_allowance(ctas_per_sm: int) -> str:
    """How much one CTA may use, as error messages say it."""
    limit = cta_smem_limit(ctas_per_sm)
    if ctas_per_sm == 1:
        return f"an sm_90 block may use at most {limit}"
    return f"each of {ctas_per_sm} CTAs sharing an sm_90 SM may use at most {limit}"


def cta_registers(ctas_per_sm: int) -> int:
    """32-bit registers one CTA's warpgroups share when `ctas_per_sm` CTAs share an SM
    (setmaxnreg moves registers within a CTA's pool, never between CTAs)."""
    return SM_REGISTERS // ctas_per_sm


# Throughput of one SM per clock (CUDA C++ Programming Guide, compute capability 9.0; the
# H100/H200 dense peaks over 132 SMs): `ex2.approx` results of the MUFU unit, and wgmma flops
# by operand width in bits (16: f16/bf16, 8: e4m3/e5m2, 32: tf32).
MUFU_EX2_PER_CLOCK = 16
WGMMA_FLOPS_PER_CLOCK = {16: 4096, 8: 8192, 32: 2048}
