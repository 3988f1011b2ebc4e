"""The backend: PTX emission and the nvgpu -> PTX printer.

* `ptx`: the PTX text builder (helpers named after the instructions they print);
* `emit_ptx`: the printer from legalized nvgpu IR to a PTX module (`tawa-opt -t ptx`), one
  module per hardware unit (fragment layouts live in `tawa_xdsl.dialects.nvgpu.layout`);
* `ptxas`: run `ptxas -arch=sm_90a` and flag the warnings that mean a slow kernel.

The driver that runs the passes and then this printer is `tawa_xdsl.compiler`.
"""
