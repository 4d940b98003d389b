"""How fast can tensor cores go through the instructions TensorIR emits? (notebook 06)

TVM 0.27 reaches the tensor cores through WMMA and `mma.sync` (both compile to HMMA); Hopper's
asynchronous `wgmma`, which cuBLAS uses, has no TensorIR intrinsic. This measures the ceiling of
`mma.sync` itself: every warp runs independent chains of `mma.sync` on registers only, no memory
traffic at all, for both shapes TVM has (m16n8k16 behind WMMA, m16n8k8 behind its mma rule), at
several warps per SM, beside cuBLAS fp16 at 4096^3 in the same run. A kernel built from these
instructions cannot beat the ceiling, whatever its schedule.

    python3 gpu/experiments/06_mma_peak.py     # on the GPU (needs cupy)
"""

import sys

import cupy as cp
import numpy as np

import helpers

SOURCE = r"""
extern "C" __global__ void peak_k16(float* out, int iters) {
    unsigned a[4] = {threadIdx.x, threadIdx.x + 1, threadIdx.x + 2, threadIdx.x + 3}, b[2] = {threadIdx.x, 7};
    float c[CHAINS][4] = {};
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int ch = 0; ch < CHAINS; ++ch)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                         : "+f"(c[ch][0]), "+f"(c[ch][1]), "+f"(c[ch][2]), "+f"(c[ch][3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
    float s = 0.f;
#pragma unroll
    for (int ch = 0; ch < CHAINS; ++ch) s += c[ch][0] + c[ch][1] + c[ch][2] + c[ch][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
extern "C" __global__ void peak_k8(float* out, int iters) {
    unsigned a[2] = {threadIdx.x, threadIdx.x + 1}, b = threadIdx.x;
    float c[CHAINS][4] = {};
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int ch = 0; ch < CHAINS; ++ch)
            asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                         : "+f"(c[ch][0]), "+f"(c[ch][1]), "+f"(c[ch][2]), "+f"(c[ch][3])
                         : "r"(a[0]), "r"(a[1]), "r"(b));
    }
    float s = 0.f;
#pragma unroll
    for (int ch = 0; ch < CHAINS; ++ch) s += c[ch][0] + c[ch][1] + c[ch][2] + c[ch][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""
CHAINS = 8  # independent accumulators per warp, as many as a 64x32 warp tile of m16n8 fragments


def peak(name, k, warps_per_sm, sms, iters=4096, repeat=20):
    """TFLOP/s of `name` with `warps_per_sm` warps on each SM (one block of them per SM)."""
    kernel = cp.RawModule(code=SOURCE, options=("-arch=sm_90", f"-DCHAINS={CHAINS}")).get_function(name)
    threads = 32 * warps_per_sm
    out = cp.empty(sms * threads, "float32")
    start, end = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(3):  # warm up
        kernel((sms,), (threads,), (out, np.int32(iters)))
    times = []
    for _ in range(repeat):
        start.record()
        kernel((sms,), (threads,), (out, np.int32(iters)))
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    flops = 2.0 * 16 * 8 * k * CHAINS * iters * warps_per_sm * sms
    return flops / np.median(times) / 1e9


def main() -> int:
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    n = 4096
    blas = helpers.cublas_time(n, n, n, "float16")
    blas_tflops = 2.0 * n**3 / blas / 1e9
    print(f"{helpers.local_gpu_spec().name}, {sms} SMs: cuBLAS float16 {n}^3 {blas:.4f} ms = {blas_tflops:,.1f} TFLOP/s")
    print(f"{CHAINS} independent mma.sync chains per warp, registers only, one block per SM")
    print(f"{'instruction':32s} {'warps/SM':>8s} {'TFLOP/s':>8s} {'% cuBLAS':>9s}")
    for name, k, label in (("peak_k16", 16, "mma.sync m16n8k16 (WMMA's)"), ("peak_k8", 8, "mma.sync m16n8k8 (mma rule's)")):
        for warps in (4, 8, 16):
            t = peak(name, k, warps, sms)
            print(f"{label:32s} {warps:8d} {t:8.1f} {t / blas_tflops:9.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
