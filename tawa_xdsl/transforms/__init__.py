"""The passes of tawa-xdsl, one module each, named after the pass.

`get_all_passes()` maps each pass name to a factory that imports it lazily, as xDSL's own
registry does, so that starting `tawa-opt` does not import every pass.
"""

from collections.abc import Callable

from xdsl.passes import ModulePass


def get_split_masked_loops() -> type[ModulePass]:
    from tawa_xdsl.transforms.split_masked_loops import SplitMaskedLoopsPass

    return SplitMaskedLoopsPass


def get_fold_grid() -> type[ModulePass]:
    from tawa_xdsl.transforms.fold_grid import FoldGridPass

    return FoldGridPass


def get_persistent() -> type[ModulePass]:
    from tawa_xdsl.transforms.persistent import PersistentPass

    return PersistentPass


def get_partition() -> type[ModulePass]:
    from tawa_xdsl.transforms.partition import PartitionPass

    return PartitionPass


def get_insert_aref() -> type[ModulePass]:
    from tawa_xdsl.transforms.insert_aref import InsertArefPass

    return InsertArefPass


def get_distribute() -> type[ModulePass]:
    from tawa_xdsl.transforms.distribute import DistributePass

    return DistributePass


def get_ring_depth() -> type[ModulePass]:
    from tawa_xdsl.transforms.ring_depth import RingDepthPass

    return RingDepthPass


def get_cooperative_consumers() -> type[ModulePass]:
    from tawa_xdsl.transforms.cooperative_consumers import CooperativeConsumersPass

    return CooperativeConsumersPass


def get_software_pipeline() -> type[ModulePass]:
    from tawa_xdsl.transforms.software_pipeline import SoftwarePipelinePass

    return SoftwarePipelinePass


def get_mma_lag() -> type[ModulePass]:
    from tawa_xdsl.transforms.mma_lag import MmaLagPass

    return MmaLagPass


def get_place_releases() -> type[ModulePass]:
    from tawa_xdsl.transforms.place_releases import PlaceReleasesPass

    return PlaceReleasesPass


def get_warp_specialize() -> type[ModulePass]:
    from tawa_xdsl.transforms.warp_specialize import WarpSpecializePass

    return WarpSpecializePass


def get_set_registers() -> type[ModulePass]:
    from tawa_xdsl.transforms.set_registers import SetRegistersPass

    return SetRegistersPass


def get_emulate_exp2() -> type[ModulePass]:
    from tawa_xdsl.transforms.emulate_exp2 import EmulateExp2Pass

    return EmulateExp2Pass


def get_lower_aref() -> type[ModulePass]:
    from tawa_xdsl.transforms.lower_aref import LowerArefPass

    return LowerArefPass


def get_lower_to_nvgpu() -> type[ModulePass]:
    from tawa_xdsl.transforms.lower_to_nvgpu import LowerToNvgpuPass

    return LowerToNvgpuPass


def get_defer_row_sums() -> type[ModulePass]:
    from tawa_xdsl.transforms.defer_row_sums import DeferRowSumsPass

    return DeferRowSumsPass


def get_legalize_nvgpu() -> type[ModulePass]:
    from tawa_xdsl.transforms.legalize_nvgpu import LegalizeNvgpuPass

    return LegalizeNvgpuPass


def get_verify_pipeline() -> type[ModulePass]:
    from tawa_xdsl.verify.verify_pipeline import VerifyPipelinePass

    return VerifyPipelinePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    return {
        "split-masked-loops": get_split_masked_loops,
        "fold-grid": get_fold_grid,
        "persistent": get_persistent,
        "partition": get_partition,
        "insert-aref": get_insert_aref,
        "distribute": get_distribute,
        "ring-depth": get_ring_depth,
        "cooperative-consumers": get_cooperative_consumers,
        "software-pipeline": get_software_pipeline,
        "mma-lag": get_mma_lag,
        "place-releases": get_place_releases,
        "tawa-warp-specialize": get_warp_specialize,
        "set-registers": get_set_registers,
        "emulate-exp2": get_emulate_exp2,
        "lower-aref": get_lower_aref,
        "lower-to-nvgpu": get_lower_to_nvgpu,
        "defer-row-sums": get_defer_row_sums,
        "legalize-nvgpu": get_legalize_nvgpu,
        "verify-pipeline": get_verify_pipeline,
    }
