"""Library kernels written in `tawa_xdsl.language`: `gemm` (C = A @ B^T) and `attention`
(the FlashAttention forward, with an optional log-sum-exp), each generic over its element
type (the descriptors' types), with helpers that give the tile IR of one specialization or
compile it to PTX."""
