"""The backend: fragment layouts, PTX emission and the nvgpu -> PTX printer.

* `layout`: which thread and register hold which element of a wgmma fragment;
* `ptx`: the PTX text builder (helpers named after the instructions they print);
* `emit_ptx`: the printer from the nvgpu level to a PTX module (`tawa-opt -t ptx`);
* `ptxas`: run `ptxas -arch=sm_90a` and flag the warnings that mean a slow kernel.

The driver that runs the passes and then this printer is `tawa_xdsl.compiler`.
"""
