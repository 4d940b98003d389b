"""Notebook 11's softmax for Hopper: notebook 10's online softmax with fewer instructions per
exponential, for the kernels whose tensor cores wait on it.

An SM's exponential unit (MUFU) gives 16 results a clock; its tensor cores 4,096 fp16 FLOP. A
consumer's tile of 64 x 128 scores needs 8,192 exponentials (512 clocks) beside 4 x 64 x 128 x d
FLOP of products (512 clocks at d = 64, 1,024 at d = 128): at head dim 64 the exponentials take as
long as the products. Three changes, each measured (`gpu/experiments/exp_poly.py`):

- `ex2.approx.ftz` written out: without fast math CUDA's exp2f is ex2.approx.f32, which wraps
  MUFU.EX2 in a compare and two predicated multiplies for results below 2^-126 (zero in fp16's P
  anyway); TVM compiles with --use_fast_math, which makes exp2f ex2.approx.ftz already, so here it
  only keeps the macro independent of that flag (alone it measured level with the lesson's);
- the row maximum of the raw scores, scaled once (scale > 0), not each pair's maximum scaled;
- `share` of every 8 column pairs' exponentials on the FMA units instead of MUFU (`exp2_fma`), as
  FlashAttention-4 does on Blackwell: 1 of 8 at head dim 64; at 128, MUFU has room and the
  polynomial only adds instructions.
"""

import numpy as np
from tvm.script import tirx as T

__all__ = ["exp2_fma", "hopper_softmax", "with_softmax", "P", "ROUND"]

#: 2^f on [-1/2, 1/2] as P[0] + P[1] f + P[2] f^2 + P[3] f^3: least squares on Chebyshev nodes, relative
#: error 1.0e-4 (fp16's P keeps 4.9e-4)
_F = np.cos(np.pi * (np.arange(2000) + 0.5) / 2000) / 2
P = [float(c) for c in np.polyfit(_F, np.exp2(_F), 3)[::-1]]
#: 1.5 * 2^23: x + ROUND, in float32, rounds x to an integer and keeps it in the sum's low mantissa bits
ROUND = 12582912.0


def exp2_fma(x):
    """2^x = 2^round(x) * p(x - round(x)) on the FMA and integer units: round(x) is added to p's exponent
    bits. x is clamped at -126, below which the exponent would wrap. TVM's simplifier would fold
    (x + ROUND) - ROUND to x, so the two rounding additions are CUDA's __fadd_rn and __fsub_rn, which
    nothing reorders, and the bits move by __float_as_int (T.reinterpret takes a variable's address,
    and ptxas then serializes the kernel's wgmma, C7511)."""
    x = T.max(x, T.float32(-126))
    r = T.call_pure_extern("float32", "__fadd_rn", x, T.float32(ROUND))
    f = x - T.call_pure_extern("float32", "__fsub_rn", r, T.float32(ROUND))
    p = ((T.float32(P[3]) * f + T.float32(P[2])) * f + T.float32(P[1])) * f + T.float32(P[0])
    bits = T.call_pure_extern("int32", "__float_as_int", p) + T.shift_left(T.call_pure_extern("int32", "__float_as_int", r), 23)
    return T.call_pure_extern("float32", "__int_as_float", bits)


def hopper_softmax(share):
    """Notebook 10's `online_softmax` (same arguments) with ex2.approx.ftz, the maximum of the raw
    scores, and `share` of every 8 column pairs' exponentials by `exp2_fma`."""
    if share not in range(9):
        raise ValueError(f"share is how many of every 8 column pairs go to the FMA units, 0 to 8, not {share!r}")

    @T.macro
    def online_softmax(s, m, l, mx, alpha, cols, scale):
        for h in T.unroll(2):
            mx[h] = s[h * 2]
            for i in T.unroll(cols // 8):
                mx[h] = T.max(mx[h], T.max(s[i * 4 + h * 2], s[i * 4 + h * 2 + 1]))
            mx[h] = T.max(m[h], mx[h] * T.float32(scale))
            mx[h] = T.cuda.warp_max(mx[h], 4)
            alpha[h] = T.exp2(m[h] - mx[h])
            m[h] = mx[h]
            l[h] = l[h] * alpha[h]
            for i in T.unroll(cols // 8):
                for e in T.unroll(2):
                    if i % 8 < share:
                        s[i * 4 + h * 2 + e] = exp2_fma(s[i * 4 + h * 2 + e] * T.float32(scale) - mx[h])
                    else:
                        T.ptx.ex2.approx.ftz.f32(s[i * 4 + h * 2 + e], s[i * 4 + h * 2 + e] * T.float32(scale) - mx[h])
                    l[h] = l[h] + s[i * 4 + h * 2 + e]
    return online_softmax


def with_softmax(softmax, make, *args):
    """`make(*args)`, a kernel whose tile macros call `online_softmax`, built with `softmax` in its place.
    The macros are not hygienic: they find the name in the module where the kernel is defined as the
    kernel is parsed, so that module's name points to `softmax` for the build, then back."""
    names = make.__globals__
    lesson, names["online_softmax"] = names["online_softmax"], softmax
    try:
        return make(*args)
    finally:
        names["online_softmax"] = lesson
