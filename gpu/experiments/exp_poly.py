"""Head dim 64 trailed cuDNN by 5-9% without the mask. Per tile, a consumer's two products (S = Q K^T,
64x128x64, and O += P V, 64x64x128) cost the tensor cores about as many cycles as its 8,192
exponentials cost the SM's 16 MUFU lanes (2^13 / 16 = 512 clocks against 2^21 FLOP / 4,096): with two
consumers the exponential unit is as busy as the tensor cores, where at d = 128 it is half as busy.

`helpers.flash_hopper_softmax.hopper_softmax(share)` is notebook 10's online softmax with
ex2.approx.ftz (without fast math exp2f's ex2.approx.f32 adds an FSETP and two predicated FMULs an element
around MUFU.EX2; TVM passes --use_fast_math, under which exp2f is ex2.approx.ftz already), the maximum of
the raw scores scaled once, and `share` of every 8 column pairs' exponentials on the FMA units (`exp2_fma`,
FlashAttention-4's trick). Here notebook 11's persistent kernel runs with notebook 10's softmax and with
hopper_softmax(0, 1, 2), built by `with_softmax`.
The single changes (ftz alone, the raw maximum alone, the share without ftz) ran at commit 683366c,
whose copy of this script had them as flags (`results/exp_poly.txt`); the shares 0-4 at d9f8ee0
(`results/exp_poly.shares.txt`).

Each kernel is checked against the float64 reference and timed in rounds alternating with cuDNN
(torch's SDPA, CUDNN_ATTENTION), as 11's sweep times them: 32k tokens a batch, 16 heads, fp16.
`sweep`: every shape of 11's sweep, with the sweep's own kernel choice, 10's softmax against
hopper_softmax(1) at head dim 64 and hopper_softmax(0) at 128.

    python gpu/experiments/exp_poly.py [sweep]
"""

import helpers
from helpers import flash_hopper_persistent as walk
from helpers.attention import attention_case, attention_flops, qkv, sdpa
from helpers.attention_sweep import HEADS
from helpers.flash_hopper_softmax import hopper_softmax, with_softmax

ON_HOPPER = dict(arch="sm_90a", tir_pipeline="tirx")
SHAPES = [(64, 4096), (64, 16384), (64, 1024), (128, 16384)]  # (head dim, tokens), not causal
VARIANTS = {"lesson": walk.online_softmax, "hopper_softmax(0)": hopper_softmax(0),
            "hopper_softmax(1)": hopper_softmax(1), "hopper_softmax(2)": hopper_softmax(2)}


def kernel(bh, n, d, softmax, causal=False, walk=walk):
    """11's sweep's choice (its `best_kernel`), with `softmax`: causal in groups of `causal_group`'s heads
    to 8k tokens at d = 64 and 2k at 128, else a block per item; not causal, persistent.
    `walk`: the module of the persistent kernel (a study's edited copy of `helpers.flash_hopper_persistent`)."""
    spec = helpers.local_gpu_spec()
    sms, l2 = spec.sm_count, spec.l2_bytes
    group = walk.causal_group(n, d, sms)
    if causal and n <= {64: 8192, 128: 2048}.get(d, 0) and bh % group == 0 and group * 4 * n * d <= l2:
        return with_softmax(softmax, walk.persistent_flash_attention, bh, n, d, True, sms, walk.in_groups(bh, group))
    return with_softmax(softmax, walk.persistent_flash_attention, bh, n, d, causal, None if causal else sms)


def sweep_softmax(d, causal, walk=walk):
    """The softmax 11's sweep gives head dim `d`: at 64 10's (`walk.online_softmax`) without the mask and
    hopper_softmax(1) with it, hopper_softmax(0) at 128 (the fastest in `sweep` at cc3a58c)."""
    return hopper_softmax(0) if d == 128 else hopper_softmax(1) if causal else walk.online_softmax


def best(walk=walk):
    """11's sweep's kernel as the notebook builds it now, with `sweep_softmax`, its persistent kernel taken
    from `walk`: build(bh, n, d, causal)."""
    return lambda bh, n, d, causal: kernel(bh, n, d, sweep_softmax(d, causal, walk), causal, walk=walk)


def with_softmax_of(label):
    """11's sweep's kernel with the softmax VARIANTS names `label`: build(bh, n, d, causal)."""
    return lambda bh, n, d, causal: kernel(bh, n, d, VARIANTS[label], causal)


def timed(nb, label, build, shape, causal, base, q, k, v):
    """`build(bh, n, d, causal)`'s kernel, checked and timed in rounds with cuDNN's `base`: one line."""
    m = nb.measure(f"{label} {'x'.join(map(str, shape))}{' causal' if causal else ''}",
                   build(shape[0] * HEADS, *shape[2:], causal), **ON_HOPPER,
                   **attention_case(*shape, causal, inputs=[q, k, v]), baseline=base, quiet=True)
    lo, hi = m.ratio_quartiles or (0, 0)
    return f"{label}: {m.tflops:5.1f} TFLOP/s {m.ratio:.3f} [{lo:.3f}-{hi:.3f}] err {m.rel_err:.0e}"


def cudnn(nb, shape, causal, q, k, v):
    name = "x".join(map(str, shape)) + (" causal" if causal else "")
    return nb.torch_op(f"cuDNN {name}", sdpa("CUDNN_ATTENTION", *shape[:2], causal), [q, k, v],
                       flops=attention_flops(*shape, causal), quiet=True)


def main(shapes=SHAPES, causals=(False,), columns=None):
    """Each shape's kernels against cuDNN, a line each: `columns(d)` lists (label, build) pairs for head dim d;
    by default, 11's kernel with each softmax of VARIANTS."""
    columns = columns or (lambda d: [(label, with_softmax_of(label)) for label in VARIANTS])
    nb = helpers.start("11_flash_attention_hopper")
    print(f"{nb.spec.name}: TFLOP/s and cuDNN's time over ours (median [quartiles] of rounds)")
    for d, n in shapes:
        for causal in causals:
            shape = (32768 // n, HEADS, n, d)
            q, k, v = qkv(*shape, True)
            base = cudnn(nb, shape, causal, q, k, v)
            print(f"  d={d:3d} {n:5d} {'causal' if causal else '      '} | "
                  + " | ".join(timed(nb, label, build, shape, causal, base, q, k, v) for label, build in columns(d)),
                  flush=True)


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["sweep"]:
        from helpers.attention_sweep import SEQS
        main([(d, n) for d in (64, 128) for n in SEQS], (False, True),
             lambda d: [(label, with_softmax_of(label)) for label in ("lesson", f"hopper_softmax({int(d == 64)})")])
    else:
        main()
