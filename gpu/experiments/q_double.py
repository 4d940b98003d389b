"""Short sequences still trail cuDNN after the relay across items (512 tokens: 0.83-0.97x in 11's
record at 871a980). One fixed cost an item keeps: the producer loads the next item's Q only when both
consumers have released the last one (after their last S, `Q_EMPTY`), so the consumer that finishes
first waits for that TMA load (32 KiB at head dim 128) before its next S, once an item of 4 tiles at
512 tokens.

`two Q`: the persistent kernel with two Q buffers, item t's in buffer t % 2, with a full and an empty
mbarrier each (parities t // 2 % 2): the producer loads item t + 1's Q while item t runs, and a
consumer starts its next S as soon as it is done. At head dim 128 it takes 32 KiB more shared memory
(192 of 227 KiB). Since the run at 5118154 (`results/q_double*.txt`, where "lesson" was one Q buffer
and "double Q" an edited copy with two) the lesson's kernel has two (`Q_BUFS` in
`helpers.flash_hopper_persistent`), and `one_q_module` edits a copy back to one (failing if the line
is not there once); with one buffer it is the kernel of 5118154 but for one more "empty" mbarrier
that kernel initialized past the end of its array. Each kernel (11's sweep's choice, its softmax
included) is checked against the float64 reference and timed in rounds alternating with cuDNN: 32k
tokens a batch, 16 heads, fp16.

`three` (2026-12-07): three Q buffers (`three_q_module`), the third after V's stages (224 of 227 KiB at head
dim 128), so the producer loads Q two items ahead. On the H100, causal 512 tokens at d = 128 is the one shape
of 11's sweep behind cuDNN (0.95 [0.95-0.97] in the record): 1 to 4 tiles an item, and each item's Q comes from
DRAM while its K and V mostly come from L2, at a shape whose bytes would take 71% of its time at the copy's rate.
Result (H100, d621ffa, `results/q_double.three.txt`): no gain, two Q against three 0.922 / 0.903 of cuDNN causal
at 512, 1.013 / 1.001 unmasked, level at 1k; what won at 512 was the walk (`causal_order.py walks`).

    python gpu/experiments/q_double.py [sweep | long | three | profile [long | short]]
"""

import inspect
import sys

import helpers
from helpers import flash_hopper_persistent as walk
from helpers.attention import attention_flops

from exp_poly import best, main  # 11's sweep's kernel, and its rounds against cuDNN
from lesson_code import edited, module_from_source


def one_q_module():
    """helpers.flash_hopper_persistent with one Q buffer (first_tile reads Q_BUFS from the kernel's module)."""
    src = edited(inspect.getsource(walk), {"\nQ_BUFS = 2 ": "\nQ_BUFS = 1 "}, "flash_hopper_persistent")
    return module_from_source("flash_hopper_one_q", src)


def one_q_padded_module():
    """One Q buffer in as much shared memory as two take (the mbarriers after an unused Q's space): whether
    what two buffers cost at long sequences is the buffers or the shared memory they take from L1."""
    src = edited(inspect.getsource(one_q_module()), {
        "blocks, at = blocks or items, (Q_BUFS * BR_H + 2 * STAGES * BC_H) * D * 2":
        "blocks, at = blocks or items, (2 * BR_H + 2 * STAGES * BC_H) * D * 2"}, "flash_hopper_one_q")
    return module_from_source("flash_hopper_one_q_padded", src)


def three_q_module():
    """helpers.flash_hopper_persistent with three Q buffers: buffer 0 where section 3's Q is, 1 and 2 after V's
    stages."""
    src = edited(inspect.getsource(walk), {
        "\nQ_BUFS = 2 ": "\nQ_BUFS = 3 ",
        "    return turn % Q_BUFS * (BR_H + 2 * STAGES * BC_H) * dim":
        "    return (turn % Q_BUFS * BR_H + T.min(turn % Q_BUFS, 1) * 2 * STAGES * BC_H) * dim"},
        "flash_hopper_persistent")
    return module_from_source("flash_hopper_three_q", src)


# 11's sweep's kernel with one Q buffer, with the lesson's two, and with one in two buffers' shared memory
ONE_Q, TWO_Q, PADDED = best(one_q_module()), best(), best(one_q_padded_module())
PROFILED = {"one": ONE_Q, "two": TWO_Q, "padded": PADDED, "cudnn": None}  # `profile`'s kernels (None: cuDNN's)


def columns(d):
    """One Q buffer, and the lesson's two, each with 11's softmax for head dim d."""
    return [("one Q", ONE_Q), ("two Q", TWO_Q)]


def long_columns(d):
    """As `columns`, and one Q buffer in two buffers' shared memory."""
    return columns(d) + [("one Q, padded", PADDED)]


# `profile`'s shapes (b, h, n, d; not causal) and kernels: where two buffers cost 2%, and where cuDNN leads most
PROFILES = {"long": ((2, 16, 16384, 128), ["one", "two", "padded", "cudnn"]),
            "short": ((64, 16, 512, 128), ["one", "two", "cudnn"])}


def launch(name, shape):
    """(Run by `profile` under ncu.) PROFILED[name] at `shape`, launched 4 times on inputs copied from the host
    (no kernel runs before, so ncu's --launch-skip 2 profiles the third call); the first 256 rows of head 0
    checked against float64."""
    import numpy as np
    import torch

    from helpers import baselines
    from helpers.attention import sdpa

    b, h, n, d = shape
    rng = np.random.default_rng(0)
    q, k, v = (torch.from_numpy(rng.standard_normal((b * h, n, d), dtype=np.float32).astype(np.float16)).cuda()
               for _ in range(3))
    if PROFILED[name] is None:
        for _ in range(4):
            out = sdpa("CUDNN_ATTENTION", b, h)(torch, q, k, v).reshape(b * h, n, d)
    else:
        out = torch.empty_like(q)
        ex = helpers.build(PROFILED[name](b * h, n, d, False), "sm_90a", tir_pipeline="tirx")
        call = baselines.on_torch_stream(ex.mod["main"], helpers.device(), [q, k, v, out])
        for _ in range(4):
            call()
    torch.cuda.synchronize()
    qf, kf, vf = (t[0].double() for t in (q, k, v))
    ref = torch.softmax(qf[:256] @ kf.T / d**0.5, -1) @ vf
    print(f"{name}: relative error {float((out[0, :256].double() - ref).norm() / ref.norm()):.1e}")


def profile(which):
    """PROFILES[which]'s kernels under Nsight Compute: where their warps wait, how busy the tensor and
    exponential pipes are, and at what clock."""
    from ncu import NCU_MENTIONED, TENSOR_PIPE_ROWS, ncu_rows, profile_side_by_side

    shape, kernels = PROFILES[which]
    rows = ncu_rows(attention_flops(*shape, False), TENSOR_PIPE_ROWS)
    return profile_side_by_side(__file__, kernels, rows, "x".join(map(str, shape)) + " fp16 attention",
                                ("tensor", "gmma", "pipe_xu", "pipe_fma", "clock", *NCU_MENTIONED), (which,))


if __name__ == "__main__":
    if sys.argv[1:2] == ["sweep"]:
        from helpers.attention_sweep import SEQS
        main([(d, n) for d in (64, 128) for n in SEQS], (False, True), columns)
    elif sys.argv[1:2] == ["profile"]:
        sys.exit(profile(sys.argv[2] if len(sys.argv) > 2 else "long"))
    elif sys.argv[1:2] == ["launch"]:
        launch(sys.argv[2], PROFILES[sys.argv[3]][0])
    elif sys.argv[1:2] == ["three"]:  # H100: two Q buffers against three where items are short
        THREE_Q = best(three_q_module())
        main([(128, 512), (128, 1024)], (True, False), lambda d: [("two Q", TWO_Q), ("three Q", THREE_Q)])
    elif sys.argv[1:2] == ["long"]:  # where the sweep at 5118154 found two buffers 1-3% behind
        main([(128, 4096), (128, 16384), (128, 4096), (128, 16384)], (False,), long_columns)
    else:
        main([(128, 512), (128, 1024), (64, 512)], (False, True), columns)
