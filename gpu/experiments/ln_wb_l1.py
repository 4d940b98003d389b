"""Is it the bytes of W and B, or the instructions that apply them? 09's layer norm reads 79% of the copy
at rows of 32,768 fp16 on the H200 and 89% without the scale and shift (`ln_scale_shift.py`); on the H100,
whose DRAM is 1.4 times slower and whose L2 is the same, it reads 90%. At 32k three blocks an SM stage
192 KiB of rows, so W and B (128 KiB) come from L2 again for every row: 192 KiB from L2 into the SM for
each 64 KiB row, where the diagnostic moves 64.

`ln, W and B of 8192`: 09's layer norm, its schedule unchanged, with W and B of 8,192 columns read at
column j % 8192 (32 KiB, which L1's 60-odd KiB beside the staged rows could hold). `ln, W and B of 1024`
(4 KiB). If they read near the diagnostic's 89%, the loads of W and B are what costs; if they stay near
79%, the arithmetic that applies them is. What the run (`results/ln_wb_l1.nvidia-h200.txt`) and the SASS
(nvcc 13 -O3 --use_fast_math, cuobjdump) showed: at 8192 TVM's cache_read indexes its local copy through
a min() it cannot fold, so the copy lives in local memory (52-54% of the copy: an artifact, not an
answer); at 1024 each thread's columns are the same at every step and nvcc loads them once, before the
row's last loop (2 LDG a row instead of 2 a step; 09's kernel loads them inside the loop). So 1024
removes both the bytes from L2 and the wait on them at every step, not the bytes alone.
Beside it, 09's layer norm and the diagnostic (`ln_scale_shift.py`'s). Each checked against its
float64 reference, then timed in 7 rounds against the float4 copy of the same bytes.

    python gpu/experiments/ln_wb_l1.py
"""

import inspect

import numpy as np

from helpers import reduction_tables
from lesson_code import edited, module_from_source
import ln_scale_shift
from ln_scale_shift import SHAPES, layer_norm_schedule, time_variants

def layer_norm_short_wb(ns, PERIOD):
    """09's `layer_norm` with W and B of PERIOD columns, read at j % PERIOD."""
    src = edited(inspect.getsource(ns["layer_norm"]), {
        'W: T.Buffer((N,), dtype), B: T.Buffer((N,), dtype)': f'W: T.Buffer(({PERIOD},), dtype), B: T.Buffer(({PERIOD},), dtype)',
        'T.Cast("float32", W[vj])': f'T.Cast("float32", W[vj % {PERIOD}])',
        'T.Cast("float32", B[vj])': f'T.Cast("float32", B[vj % {PERIOD}])'}, "09's layer_norm")
    header = "import helpers\nfrom tvm.script import ir as I\nfrom tvm.script import tirx as T\n\n"
    return module_from_source(f"layer_norm_wb_{PERIOD}", header + src).layer_norm


def variants(ns, m, n):
    """name -> (schedule, TIR pipeline, inputs, float64 reference) at m x n: `ln_scale_shift.variants`'s layer
    norm and diagnostic, with 09's layer norm on W and B of 8,192 and 1,024 columns between them."""
    lanes = reduction_tables.plan(n, "float16")[0]
    xn, w, b = reduction_tables.layer_norm_inputs(m, n)
    known = ln_scale_shift.variants(ns, m, n)
    return {
        "ln": known["ln"],
        **{f"ln, W and B of {p}": (layer_norm_schedule(ns, layer_norm_short_wb(ns, p)(m, n, lanes), lanes), "default",
                                   [xn, w[:p].copy(), b[:p].copy()],
                                   reduction_tables.layer_norm_ref(xn, np.tile(w[:p], n // p), np.tile(b[:p], n // p)))
           for p in (8192, 1024)},
        "ln, no scale or shift": known["ln, no scale or shift"],
    }


if __name__ == "__main__":
    time_variants(variants, SHAPES)
