"""The backend: fragment layouts, PTX emission, the nvgpu -> PTX printer and `compile_to_ptx`.

* `layout`: which thread and register hold which element of a wgmma fragment;
* `ptx`: the PTX text builder (helpers named after the instructions they print);
* `emit_ptx`: the printer from the nvgpu level to a PTX module (`tawa-opt -t ptx`);
* `ptxas`: run `ptxas -arch=sm_90a` and flag the warnings that mean a slow kernel;
* `compile`: tile IR -> PTX plus what the runtime needs to launch it.
"""
