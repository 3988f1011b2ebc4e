"""numpy interpreters for every IR level, the reference the compiler is tested against.

`engine` is the one evaluator they share; `tile` runs tile IR (`run_kernel`), `aref` runs
warp-specialized IR with warp groups as coroutines (`run_warp_specialized`), `mbarrier` runs
the IR after `lower-aref` on modelled barriers (`run_mbarrier_kernel`), `nvgpu` runs the IR
after `lower-to-nvgpu` thread by thread (`run_nvgpu_kernel`, fragments in `fragments`), and
`scheduler` picks the interleaving of the concurrent levels.
"""
