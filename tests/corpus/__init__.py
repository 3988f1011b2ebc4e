"""Kernels written as a Triton user writes them (tensor descriptors, default launch options),
each with its numpy reference: the GPU path must compile every one (tests/unit) and match numpy
on the H200 (tests/gpu). One module per family; `ALL` is their union."""
