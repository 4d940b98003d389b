"""Head dim 64 trails cuDNN by 5-9% without the mask. Per tile, a consumer's two products (S = Q K^T,
64x128x64, and O += P V, 64x64x128) cost the tensor cores about as many cycles as its 8,192
exponentials cost the SM's 16 MUFU lanes (2^13 / 16 = 512 clocks against 2 * 2^19 / 2,048): with two
consumers the exponential unit is as busy as the tensor cores, where at d = 128 it is half as busy.
FlashAttention-4 moves a share of the exponentials to the FMA units: 2^x = 2^round(x) * p(x - round(x)),
p a polynomial on [-1/2, 1/2], 2^round(x) added to p's exponent bits. Here the notebook's persistent
kernel (its code as it is) runs with an online softmax that computes k of every 8 column pairs that
way (k = 0: the lesson's softmax), through the kernel's own hook: the tile macros look
`online_softmax` up in the kernel's module.

Each variant is checked against the float64 reference and timed in rounds alternating with cuDNN
(torch's SDPA, CUDNN_ATTENTION), as 11's sweep times them: 32k tokens a batch, 16 heads, fp16.

    python gpu/experiments/exp_poly.py [sweep]
"""

import numpy as np
from tvm.script import tirx as T

import helpers
from helpers import flash_hopper_persistent as walk
from helpers.attention import attention_case, attention_flops, qkv, sdpa
from helpers.attention_sweep import HEADS

ON_HOPPER = dict(arch="sm_90a", tir_pipeline="tirx")
SHAPES = [(64, 4096), (64, 16384), (64, 1024), (128, 16384)]  # (head dim, tokens), not causal
VARIANTS = {"lesson": {}, "1/8 polynomial": dict(share=1), "ftz": dict(share=0, ftz=True),
            "ftz, 1/8 polynomial": dict(share=1, ftz=True), "ftz, raw max": dict(share=0, ftz=True, raw_max=True),
            "ftz, raw max, 1/8 polynomial": dict(share=1, ftz=True, raw_max=True)}

# 2^f on [-1/2, 1/2]: degree 3, least squares on Chebyshev nodes (relative error 1.0e-4; fp16 P keeps 4.9e-4)
_f = np.cos(np.pi * (np.arange(2000) + 0.5) / 2000) / 2
C = [float(c) for c in np.polyfit(_f, np.exp2(_f), 3)[::-1]]
MAGIC = 12582912.0  # 1.5 * 2^23: x + MAGIC rounds x to an integer, held in the sum's low mantissa bits


def exp2_poly(x):
    """2^x on the FMA units: x >= -126 after the clamp (below, the exponent would wrap); TVM's
    simplifier would fold (x + M) - M to x, so the two additions that round are CUDA's __fadd_rn and
    __fsub_rn, which nothing reorders; the bits
    by __float_as_int (T.reinterpret takes the variable's address, and ptxas then serializes the wgmma)."""
    xc = T.max(x, T.float32(-126))
    t = T.call_pure_extern("float32", "__fadd_rn", xc, T.float32(MAGIC))
    f = xc - T.call_pure_extern("float32", "__fsub_rn", t, T.float32(MAGIC))
    p = ((T.float32(C[3]) * f + T.float32(C[2])) * f + T.float32(C[1])) * f + T.float32(C[0])
    bits = T.call_pure_extern("int32", "__float_as_int", p) + T.shift_left(T.call_pure_extern("int32", "__float_as_int", t), 23)
    return T.call_pure_extern("float32", "__int_as_float", bits)


def softmax_with(share, ftz=False, raw_max=False):
  """The lesson's online softmax with `share` of every 8 column pairs' exponentials by exp2_poly; ftz:
  the others by ex2.approx.ftz (exp2f's ex2.approx.f32 costs an FSETP and two predicated FMULs an
  element around MUFU.EX2, for results below 2^-126); raw_max: the maximum of the raw scores, scaled
  once (scale > 0), instead of each pair's maximum scaled."""
  @T.macro
  def online_softmax(s, m, l, mx, alpha, cols, scale):
    for h in T.unroll(2):
        mx[h] = m[h]
        if raw_max:
            mx[h] = s[h * 2]
            for i in T.unroll(cols // 8):
                mx[h] = T.max(mx[h], T.max(s[i * 4 + h * 2], s[i * 4 + h * 2 + 1]))
            mx[h] = T.max(m[h], mx[h] * T.float32(scale))
        else:
            for i in T.unroll(cols // 8):
                mx[h] = T.max(mx[h], T.max(s[i * 4 + h * 2], s[i * 4 + h * 2 + 1]) * T.float32(scale))
        mx[h] = T.cuda.warp_max(mx[h], 4)
        alpha[h] = T.exp2(m[h] - mx[h])
        m[h] = mx[h]
        l[h] = l[h] * alpha[h]
        for i in T.unroll(cols // 8):
            for e in T.unroll(2):
                if i % 8 < share:
                    s[i * 4 + h * 2 + e] = exp2_poly(s[i * 4 + h * 2 + e] * T.float32(scale) - mx[h])
                elif ftz:
                    T.ptx.ex2.approx.ftz.f32(s[i * 4 + h * 2 + e], s[i * 4 + h * 2 + e] * T.float32(scale) - mx[h])
                else:
                    s[i * 4 + h * 2 + e] = T.exp2(s[i * 4 + h * 2 + e] * T.float32(scale) - mx[h])
                l[h] = l[h] + s[i * 4 + h * 2 + e]
  return online_softmax


def kernel(bh, n, d, variant, causal=False):
    lesson = walk.online_softmax
    walk.online_softmax = softmax_with(**variant) if variant else lesson
    try:
        return best_kernel(bh, n, d, causal)
    finally:
        walk.online_softmax = lesson


def best_kernel(bh, n, d, causal, group=16):
    """11's sweep's choice (its `best_kernel`): causal in groups of 16 heads (8 where a group's items
    would be one wave) to 4k tokens at d = 64 and 1k at 128, else a block per item; not causal, persistent."""
    spec = helpers.local_gpu_spec()
    sms, l2 = spec.sm_count, spec.l2_bytes
    group = group // 2 if abs(group * n // walk.BR_H - sms) < sms // 16 else group
    if causal and n <= {64: 4096, 128: 1024}.get(d, 0) and bh % group == 0 and group * 4 * n * d <= l2:
        return walk.persistent_flash_attention(bh, n, d, True, sms, walk.in_groups(bh, group))
    return walk.persistent_flash_attention(bh, n, d, causal, None if causal else sms)


def sweep():
    """11's sweep, each shape with the lesson's softmax and the best variant for its head dim."""
    from helpers.attention_sweep import SEQS
    nb = helpers.start("11_flash_attention_hopper")
    best = {64: "ftz, raw max, 1/8 polynomial", 128: "ftz, raw max"}
    print(f"{nb.spec.name}: 11's sweep, TFLOP/s and cuDNN's time over ours (median [quartiles] of rounds)")
    for d in (64, 128):
        for causal in (False, True):
            for n in SEQS:
                shape = (32768 // n, HEADS, n, d)
                name = "x".join(map(str, shape)) + (" causal" if causal else "")
                q, k, v = qkv(*shape, True)
                base = nb.torch_op(f"cuDNN {name}", sdpa("CUDNN_ATTENTION", *shape[:2], causal), [q, k, v],
                                   flops=attention_flops(*shape, causal), quiet=True)
                line = f"  d={d:3d} {n:5d} {'causal' if causal else '      '}"
                for label in ("lesson", best[d]):
                    m = nb.measure(f"{label} {name}", kernel(shape[0] * HEADS, n, d, VARIANTS[label], causal),
                                   **ON_HOPPER, **attention_case(*shape, causal, inputs=[q, k, v]), baseline=base,
                                   quiet=True)
                    lo, hi = m.ratio_quartiles or (0, 0)
                    line += f" | {label}: {m.tflops:5.1f} TFLOP/s {m.ratio:.3f} [{lo:.3f}-{hi:.3f}] err {m.rel_err:.0e}"
                print(line, flush=True)


def main():
    nb = helpers.start("11_flash_attention_hopper")
    f = np.linspace(-0.5, 0.5, 100001)
    print(f"{nb.spec.name}: not causal, TFLOP/s and cuDNN's time over ours (median [quartiles] of rounds);"
          f" polynomial's relative error {np.max(np.abs(np.polyval(C[::-1], f) / np.exp2(f) - 1)):.1e}")
    for d, n in SHAPES:
        shape = (32768 // n, HEADS, n, d)
        name = "x".join(map(str, shape))
        q, k, v = qkv(*shape, True)
        base = nb.torch_op(f"cuDNN {name}", sdpa("CUDNN_ATTENTION", *shape[:2], False), [q, k, v],
                           flops=attention_flops(*shape, False), quiet=True)
        for label, variant in VARIANTS.items():
            m = nb.measure(f"{label} {name}", kernel(shape[0] * HEADS, n, d, variant), **ON_HOPPER,
                           **attention_case(*shape, False, inputs=[q, k, v]), baseline=base, quiet=True)
            lo, hi = m.ratio_quartiles or (0, 0)
            print(f"  d={d:3d} {n:5d} {label:30s} {m.tflops:6.1f} TFLOP/s, {m.ratio:.3f} [{lo:.3f}-{hi:.3f}],"
                  f" error {m.rel_err:.0e}", flush=True)


if __name__ == "__main__":
    import sys

    sweep() if sys.argv[1:2] == ["sweep"] else main()
