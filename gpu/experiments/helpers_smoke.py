"""The helpers end to end on a GPU: banner, peaks, a 2^24 vector add built, checked and timed,
cuBLAS fp32 and fp16 in the same run, and the ptxas report. Run: python gpu/experiments/helpers_smoke.py"""

import numpy as np
import tvm
from tvm.script import tirx as T

import helpers

n = 1 << 24


@T.prim_func(s_tir=True)
def add(A: T.Buffer((n,), "float32"), B: T.Buffer((n,), "float32"), C: T.Buffer((n,), "float32")):
    T.func_attr({"tirx.noalias": True})
    for i in range(n):
        with T.sblock("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = A[vi] + B[vi]


nb = helpers.start("helpers_smoke")
s = nb.spec
print(f"peaks: fp32 {s.peak_fp32_tflops:.1f} TFLOP/s, fp16 TC {s.peak_fp16_tc_tflops:.0f} TFLOP/s, "
      f"DRAM {s.dram_gbps:.0f} GB/s, L2 {s.l2_bytes >> 20} MiB, smem/block {s.shared_memory_per_block >> 10} KiB")
print("target:", nb.target)
rng = np.random.default_rng(0)
a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
results = []
for threads in (128, 256, 512):
    sch = tvm.s_tir.Schedule(add)
    (i,) = sch.get_loops(sch.get_sblock("C"))
    bx, tx = sch.split(i, [None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    results.append(nb.measure(f"vector add 2^24, {threads} threads", sch, [a, b, np.empty_like(a)],
                              lambda: a.astype(np.float64) + b, bytes=3.0 * 4 * n))
if helpers.nvcc_path():
    print(helpers.ptxas_report(sch)[0])
f32 = nb.cublas_matmul(4096, 4096, 4096, "float32")
f16 = nb.cublas_matmul(4096, 4096, 4096, "float16")
print(helpers.table(results + [f32, f16]))
