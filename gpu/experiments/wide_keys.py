"""Wider key tiles at head dim 128: FlashAttention-3 takes 176 keys a tile there without the mask
(`tile_size_fwd_sm90`: 128 x 176), notebook 11 takes 128. Per tile a consumer does the same fixed work
whatever the width (two row maxima across 4 lanes, the rescale of O's 64 registers, the barriers and
the mbarrier waits), so 176 keys spread it over 37% more products; Q's 32 KiB are read from shared
memory once per 176 keys instead of 128. The cost: 88 + 44 registers of S and P a thread instead of
64 + 32 (O's 64 beside them), and 88 KiB a stage of K and V, so one Q buffer (208 KiB in all).

Variants of 11's persistent kernel (its sweep's softmax at d = 128, `hopper_softmax(0)`), each an
edited copy (`lesson_code.edited`): the lesson's (128 keys, two Q buffers), 128 keys with one Q buffer,
176 keys with one Q buffer (setmaxnreg 232/40 as the lesson, and 240/24 as FlashAttention-3). The
sequence is 16,896 tokens (a multiple of 128 and of 176, so no tile is partial: the kernels mask no
padded keys), one batch of 16 heads: 2,112 items, 16 per SM. Each is checked against the float64
reference and timed in rounds alternating with cuDNN (torch's SDPA), as 11's sweep times them.

    python gpu/experiments/wide_keys.py [build]     (build: compile each variant and print ptxas's registers and spills)
"""

import inspect
import sys

import helpers
from helpers import flash_hopper_persistent as walk

from exp_poly import best, main  # 11's sweep's kernel, and its rounds against cuDNN
from lesson_code import edited, module_from_source

N, D = 16896, 128  # 132 row blocks of 128, 96 tiles of 176 keys (132 of 128)


def lesson_with_keys(keys: int):
    """Notebook 11's exported code with `keys` keys a tile (BC_H)."""
    lesson = helpers.lessons.lesson("11_flash_attention_hopper")
    src = edited(inspect.getsource(lesson), {"BR_H, BC_H, STAGES, Q_BUFS = 128, 128, 2, 1":
                                             f"BR_H, BC_H, STAGES, Q_BUFS = 128, {keys}, 2, 1"}, "notebook 11")
    return module_from_source(f"flash_attention_hopper_{keys}", src)


def walk_with(keys: int, q_bufs: int, registers: tuple[int, int] = (232, 40)):
    """helpers.flash_hopper_persistent on `lesson_with_keys(keys)`, with `q_bufs` Q buffers and setmaxnreg's
    (consumer, producer) registers."""
    lesson = lesson_with_keys(keys)
    consumer, producer = registers
    src = edited(inspect.getsource(walk), {
        "from helpers.lessons.flash_attention_hopper import": f"from {lesson.__name__} import",
        "\nQ_BUFS = 2 ": f"\nQ_BUFS = {q_bufs} ",
        ".u32\"](232)": f".u32\"]({consumer})", ".u32\"](40)": f".u32\"]({producer})"}, "flash_hopper_persistent")
    return module_from_source(f"flash_hopper_{keys}_{q_bufs}q_{consumer}", src)


VARIANTS = {"128 keys, 2 Q": walk, "128 keys, 1 Q": walk_with(128, 1), "176 keys, 1 Q": walk_with(176, 1),
            "176 keys, 1 Q, 240 regs": walk_with(176, 1, (240, 24))}


def columns(d):
    return [(label, best(module)) for label, module in VARIANTS.items()]


def build_only():
    """Each variant compiled for sm_90a here (no GPU needed): ptxas's registers and spills a thread."""
    from helpers.flash_hopper_softmax import hopper_softmax, with_softmax

    for label, module in VARIANTS.items():  # as `best` builds them at d = 128, for 132 SMs
        kernel = with_softmax(hopper_softmax(0), module.persistent_flash_attention, 16, N, D, False, 132)
        ex = helpers.build(kernel, "sm_90a", tir_pipeline="tirx")
        print(f"{label}: " + "; ".join(map(str, helpers.ptxas_report(ex, "sm_90a"))), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["build"]:
        build_only()
    else:
        main([(D, N)], (False,), columns)
