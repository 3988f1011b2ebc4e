// tawa-run runs a kernel in the interpreter and reports what it stored.
// RUN: tawa-run %s --grid 2 --args x=arange:8x4:f32 o=zeros:8x4:f32 s=0.5 | filecheck %s
// RUN: tawa-run %s --grid 2 --args arange:8x4 zeros:8x4 -1 | filecheck %s --check-prefix=UNNAMED
// RUN: not tawa-run %s --grid 2 --args x=arange:8x4 o=zeros:8x4 2>&1 | filecheck %s --check-prefix=COUNT
// RUN: not tawa-run %s --grid 2 --args x=arange:8x4:f16 o=zeros:8x4 1 2>&1 | filecheck %s --check-prefix=DTYPE
// RUN: not tawa-run %s --grid 2 --args x=arange:8by4 o=zeros:8x4 1 2>&1 | filecheck %s --check-prefix=SPEC
// RUN: tawa-run %examples/gemm.mlir --grid 6 --args a_desc=randn:300x100 b_desc=randn:200x100 c_desc=zeros:300x200 m=300 n=200 k=100 | filecheck %s --check-prefix=GEMM

// Each of the grid's two programs scales 4 rows of x by s and stores them to o.
// CHECK: o: 8x4 float32 sum=248 mean=7.75 min=0 max=15.5 nan=0 sha256={{[0-9a-f]+$}}
// CHECK-NOT: x:
// UNNAMED: arg1: 8x4 float32 sum=-496 mean=-15.5 min=-31 max=-0 nan=0
// COUNT: tawa-run: {{.*}}tawa_run.mlir:[[# @LINE + 4]]:1: error: @scale takes 3 arguments, got 2
// DTYPE: tawa-run: {{.*}}tawa_run.mlir:[[# @LINE + 3]]:1: error: @scale argument 0 (!tile.desc<4x4xf32>): expected a float32 array, got float16
// SPEC: tawa-run: error: --args: argument 0 ('x=arange:8by4'): bad shape '8by4' (expected sizes joined by 'x', such as 300x100)
// GEMM: c_desc: 300x200 float16 sum={{.*}} nan=0 sha256={{[0-9a-f]+$}}
func.func @scale(%x: !tile.desc<4x4xf32>, %o: !tile.desc<4x4xf32>, %s: f32) {
  %c0 = arith.constant 0 : i32
  %c4 = arith.constant 4 : i32
  %pid = tile.program_id 0 : i32
  %row = arith.muli %pid, %c4 : i32
  %v = tile.load %x[%row, %c0] : !tile.desc<4x4xf32> -> tensor<4x4xf32>
  %st = tile.splat %s : f32 -> tensor<4x4xf32>
  %r = arith.mulf %v, %st : tensor<4x4xf32>
  tile.store %o[%row, %c0], %r : !tile.desc<4x4xf32>, tensor<4x4xf32>
  func.return
}
