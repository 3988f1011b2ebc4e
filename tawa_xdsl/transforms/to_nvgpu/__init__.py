"""The pieces of `lower-to-nvgpu` (the pass: `tawa_xdsl.transforms.lower_to_nvgpu`), one
module per kind of thing lowered; the pass walks a consumer group op by op and hands each op
to the module of its operands' kind.

* `common`: per-thread indices, errors, small IR builders shared by all of them;
* `slots`: tiles that still live in smem slots (views for wgmma operands and vector reads),
  and their reads into registers where anything else takes them;
* `fragments`: register fragments: splats, converts, elementwise math, row reductions, row
  and column vectors;
* `masks`: index tiles and masks, kept symbolic until a `tile.where` becomes one
  `nvgpu.fragment_mask` (or a `fragment_select` for data-dependent comparisons);
* `wgmma`: `tile.dot` as an SS or RS wgmma, the wait groups that retire them, the
  overlapped MMA schedule of lookahead loops and the consumers' ping-pong;
* `stores`: tile stores as clipped `st.global` or through staging smem and a TMA store.
"""
