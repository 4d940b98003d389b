"""Layer norm's and the softmax's long rows on the H200, after `ln_scale_shift.py`: at 32k, 09's layer
norm reads 79% of the copy, the same kernel without scale and shift 89%, the softmax 86%; their top stall
is the shared-memory pipe's queue (mio_throttle), beside the loads' (long_scoreboard).

In 09's first pass lane t takes the row's elements t, t + lanes, t + 2 lanes, ...: each read is a 2-byte
load from shared memory, 64 of them a thread at 32k. `vectors`: lane t takes the elements it staged
itself, 8 neighbours at a time (element k of lane t is X[k // 8 * 8 lanes + 8 t + k % 8]), so nvcc can
read them 16 bytes at once: 8 loads a thread instead of 64, the same bytes. Each lane still sees N / lanes
elements, so Welford's weights and Chan's merge are unchanged (and the online softmax's rescaling).
`unroll 2`: the last pass's loop unrolled by 2 as well (`ln_unroll.py`: +0.3-0.8 points on the H100).
Checked against the float64 references, timed in 7 rounds alternating with the float4 copy of the same
bytes (2^26 fp16 values, 256 MiB moved).

    python gpu/experiments/ln_vectors.py
"""

import inspect

from helpers import reduction_tables
from lesson_code import edited, module_from_source
from ln_scale_shift import time_variants

SHAPES = [(2048, 32768), (4096, 16384), (8192, 8192)]
VECTOR_ORDER = {"X[vi, vk * lanes + vt]": "X[vi, vk // 8 * (lanes * 8) + vt * 8 + vk % 8]"}


def in_vectors(func):
    """09's `func` (layer_norm or online_softmax) with its first pass over each lane's own 16-byte vectors."""
    src = edited(inspect.getsource(func), VECTOR_ORDER, f"09's {func.__name__}")
    header = "import helpers\nfrom tvm.script import ir as I\nfrom tvm.script import tirx as T\n\n"
    return getattr(module_from_source(f"{func.__name__}_vectors", header + src), func.__name__)


def unroll_last_pass(sch, by=2):
    """The last pass's loop over the thread's vectors split by `by` and unrolled (as `ln_unroll.py`)."""
    loop = sch.get_loops(sch.get_sblock("norm"))[-2]
    sch.unroll(sch.split(loop, [None, by])[1])
    return sch


def variants(ns, m, n):
    """name -> (schedule, TIR pipeline, inputs, float64 reference) at m x n."""
    lanes = reduction_tables.plan(n, "float16")[0]
    xn, w, b = reduction_tables.layer_norm_inputs(m, n)
    ref = reduction_tables.layer_norm_ref(xn, w, b)
    x = reduction_tables.logits(m, n)
    softmax_ref = reduction_tables.softmax_ref(x)

    def staged(mod):
        return ns["row_in_shared"](ns["one_kernel"](mod, lanes, 1, 8), lanes, 1, 8)

    def ln(layer_norm):
        return ns["scale_shift_in_registers"](staged(layer_norm(m, n, lanes)), 8)

    vec_ln, vec_softmax = in_vectors(ns["layer_norm"]), in_vectors(ns["online_softmax"])
    return {
        "ln": (ln(ns["layer_norm"]), "default", [xn, w, b], ref),
        "ln, vectors": (ln(vec_ln), "default", [xn, w, b], ref),
        "ln, vectors, unroll 2": (unroll_last_pass(ln(vec_ln)), "default", [xn, w, b], ref),
        "softmax": (staged(ns["online_softmax"](m, n, lanes)), "default", [x], softmax_ref),
        "softmax, vectors": (staged(vec_softmax(m, n, lanes)), "default", [x], softmax_ref),
    }


if __name__ == "__main__":
    time_variants(variants, SHAPES)
