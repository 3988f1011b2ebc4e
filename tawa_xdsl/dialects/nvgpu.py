from xdsl.ir import Dialect

Nvgpu = Dialect("nvgpu", [], [])
