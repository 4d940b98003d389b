"""Notebook 09's plumbing: the sweep over row lengths and its table, the large rows, the copy timed at
several sizes, the summary roofline and the checks of the exercise.

The schedules are the lesson, so they stay in the notebook: these functions take them as arguments
(`fastest_softmax(m, n)`, `fastest_layer_norm(m, n)`) and only measure, tabulate and draw. The
computations and their NumPy references come from the notebook's exported cells
(`helpers.lessons.reductions`), so the sweep times exactly what the lesson defines.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from . import plots, records
from .env import datasheet
from .kernels import require_divides
from .bench import run

#: the row lengths of the sweep: a head dimension to a vocabulary; 2^26 elements in all at each, 128 MiB
#: of fp16 each way, so that every run reads and writes DRAM (not L2) and runs back to back, as the copy
#: that is the ceiling does
ROW_LENGTHS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
ELEMENTS = 1 << 26


def logits(M, N, dtype="float16"):
    """The softmax's test rows: a spread of 3, row 0 masked with -inf every 7th entry (probability
    exactly 0) and row 1 shifted by 60, where exp overflows unless the row's maximum is subtracted."""
    x = (np.random.default_rng(1).standard_normal((M, N)) * 3).astype(dtype)
    x[0, ::7] = -np.inf
    x[1] += 60
    return x


def layer_norm_inputs(M, N, dtype="float16"):
    """Layer norm's rows (a mean of 20 against a spread of 3), scale and shift."""
    g = np.random.default_rng(2)
    return ((g.standard_normal((M, N)) * 3 + 20).astype(dtype), g.standard_normal(N).astype(dtype),
            g.standard_normal(N).astype(dtype))


def plan(n, dtype):
    """(threads per row, rows per block, elements per vector) for rows of `n` elements: 16-byte
    vectors; long rows get a block of 128 to 512 threads, each with about 4 vectors of the row;
    rows of up to 128 vectors (4 a lane of a warp) a warp or less each, several rows to a block of 128
    threads (images/reduction_plan.png). A row of 128 vectors on a warp rather than a block of 128
    threads with one vector each: each thread has 4 loads in flight, not one, and the row's sums need
    no barrier between warps (on the H200 at 1,024 fp16 values, layer norm 78% -> 95% of the copy and
    softmax 81% -> 86%: gpu/experiments/short_rows.py)."""
    if dtype not in ("float16", "float32"):
        raise ValueError(f"rows of float16 or float32, not {dtype!r}")
    vector = 16 // np.dtype(dtype).itemsize
    if n % vector or n < 2 * vector:
        raise ValueError(f"a row of {n} {dtype} values cannot be cut into 16-byte vectors for 2 threads or more: "
                         f"use a multiple of {vector}, at least {2 * vector}")
    per_row = n // vector  # threads if each took one vector
    if per_row > 128:
        lanes = min(512, max(128, per_row // 4))
        require_divides(n, lanes * vector, "threads x vector")
        return lanes, 1, vector
    lanes = min(32, per_row)
    require_divides(n, lanes * vector, "threads x vector")
    return lanes, 128 // lanes, vector


def staged_fits(spec, rows, n, dtype):
    """Whether a block's `rows` rows of `n` values fit in this GPU's shared memory (48 KiB where the GPU
    is unknown), with 1 KiB left for the allreduces."""
    limit = spec.max_shared_memory_per_block if spec else 48 * 1024
    return rows * n * np.dtype(dtype).itemsize + 1024 <= limit


def softmax_ref(x):
    """Softmax of each row in float64, the maximum subtracted first: the reference every softmax is checked against."""
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layer_norm_ref(x, w, b, eps=1e-5):
    """Layer norm of each row in float64 (NumPy's two-pass variance): the reference for Welford's one pass."""
    x = x.astype(np.float64)
    mean = x.mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis=1, keepdims=True) + eps) * w.astype(np.float64) + b.astype(np.float64)


def softmax_against_torch(nb, x, quiet=False):
    """Time PyTorch's softmax on the rows `x`, and return (measure, its measurement): measure(name, sch)
    checks a softmax schedule on the same rows against float64 NumPy and times it in rounds alternating
    with PyTorch's, so "x torch" is a ratio both timings' drift cannot move."""
    m, n = x.shape
    dtype = "fp16" if x.dtype == np.float16 else "fp32"
    base = nb.torch_op(f"torch.softmax {dtype} {m}x{n}", _torch_softmax, [x], bytes=2 * x.nbytes, quiet=quiet)

    def measure(name, sch):
        return nb.measure(name, sch, [x, np.empty_like(x)], lambda: softmax_ref(x), bytes=2 * x.nbytes,
                          tol=2e-3 if x.dtype == np.float16 else 1e-5, baseline=base)
    return measure, base


def softmax_fp32(nb, M, N, sch):
    """The fp32 softmax on M x N test rows, against PyTorch's fp32 softmax in the same rounds."""
    measure, _ = softmax_against_torch(nb, logits(M, N, "float32"), quiet=True)
    return measure("softmax fp32: online, row in shared memory", sch)


def torch_layer_norm(nb, x, w, b):
    """PyTorch's layer norm on the same rows, scale and shift, timed as the baseline of ours."""
    m, n = x.shape
    return nb.torch_op(f"torch layer_norm fp16 {m}x{n}", _torch_layer_norm, [x, w, b], bytes=2 * x.nbytes)


def _torch_softmax(torch, x):
    return torch.softmax(x, dim=-1)


def _torch_layer_norm(torch, x, w, b):
    return torch.nn.functional.layer_norm(x, (x.shape[1],), w, b)


def rows_against_torch(nb, m, n, fastest_softmax, fastest_layer_norm, quiet=True):
    """Softmax and layer norm on `m` rows of `n` fp16 values, each checked and timed in rounds
    alternating with PyTorch's kernel on the same arrays, so their ratio is one drift cannot move.
    Returns (softmax, torch.softmax, layer norm, torch layer_norm) measurements."""
    x, (xn, w, b) = logits(m, n), layer_norm_inputs(m, n)
    base = nb.torch_op(f"torch.softmax {m}x{n}", _torch_softmax, [x], bytes=2 * x.nbytes, quiet=True)
    ours = nb.measure(f"softmax {m}x{n}", fastest_softmax(m, n), [x, np.empty_like(x)],
                      lambda: softmax_ref(x), bytes=2 * x.nbytes, tol=2e-3, baseline=base, quiet=quiet)
    base_ln = nb.torch_op(f"torch layer_norm {m}x{n}", _torch_layer_norm, [xn, w, b], bytes=2 * xn.nbytes, quiet=True)
    ours_ln = nb.measure(f"layer norm {m}x{n}", fastest_layer_norm(m, n), [xn, w, b, np.empty_like(xn)],
                         lambda: layer_norm_ref(xn, w, b), bytes=2 * xn.nbytes, tol=2e-3, baseline=base_ln,
                         quiet=quiet)
    return ours, ours.baseline_in_rounds(base), ours_ln, ours_ln.baseline_in_rounds(base_ln)


def row_length_sweep(nb, copy, fastest_softmax, fastest_layer_norm, row_lengths=ROW_LENGTHS):
    """The sweep of section 5: 2^26 fp16 elements cut into rows of each length, ours against PyTorch's,
    drawn against the copy ceiling. Returns {kernel: [measurement per row length]}."""
    found = {"softmax": [], "torch.softmax": [], "layer norm": [], "torch layer_norm": []}
    for n in row_lengths:
        for key, m in zip(found, rows_against_torch(nb, ELEMENTS // n, n, fastest_softmax, fastest_layer_norm)):
            found[key].append(m)
    plots.sweep(list(row_lengths), found, xlabel="row length (2^26 fp16 elements in all)",
                ceiling=copy.gbps if copy.ok else None, ceiling_label="copy (ceiling)",
                title="Row softmax and layer norm, fp16")
    return found


def sweep_table(found, copy, row_lengths=ROW_LENGTHS) -> str:
    """The sweep as a table: each kernel's share of the copy's GB/s and its ratio to PyTorch's in the same
    rounds, with the quartiles of the per-round ratios."""
    def share(m):
        return f"{m.gbps / copy.gbps:.0%} of copy" if m.ok and copy.ok else "-"

    def ratio(m):  # the median of the per-round ratios [their quartiles]
        return m.ratio_text() if m.ratio else "-"

    rows = [("row length", "softmax", "x torch", "layer norm", "x torch")]
    for n, s, ln in zip(row_lengths, found["softmax"], found["layer norm"]):
        rows.append((n, share(s), ratio(s), share(ln), ratio(ln)))
    return plots.text_table(rows)


def steps_table(steps, baseline, copy) -> str:
    """The ladder's table (plots.table) of the steps that have a result, each against the baseline timed in
    its rounds and as a share of the copy; steps without one (a step not yet recorded on this GPU) are named
    under it rather than given a row of dashes and a source column that would not fit a slide."""
    shown = [m for m in steps if m.ok]
    text = plots.table(shown + [baseline], baseline=baseline, ceiling_gbps=copy.gbps if copy.ok else None)
    waiting = [m.name for m in steps if not m.ok]
    return text + (f"\nno result yet for: {', '.join(waiting)}" if waiting else "")


def copy_sizes() -> str:
    """The float4 copy of notebook 00 timed on the H100 at 2^22..2^26 floats (gpu/experiments/09_reductions.py
    copy-sizes), beside what that GPU's L2 holds and its DRAM's peak (its data sheet), so the reader sees which
    sizes were served by L2: no copy from DRAM can beat the DRAM's peak."""
    made, *lines = (records.EXPERIMENTS_DIR / "09_reductions.copy-sizes.txt").read_text().splitlines()
    gpu = made.lstrip("# ").split(",")[0]
    sheet = datasheet(gpu)
    out = [made.lstrip("# ").split(";")[0] + ", L2 not flushed between runs:"]
    for line in (line for line in lines if line.startswith("copy")):
        moved = 2 * 4 * (1 << int(line.split("^")[1].split()[0]))  # each float read once, written once
        fits = sheet is not None and moved <= sheet.l2_mib << 20
        out.append(f"{line}   {moved / 2**20:5.0f} MiB moved{'  (fits in L2)' if fits else ''}")
    if sheet is not None:
        out.append(f"{gpu}: L2 {sheet.l2_mib} MiB, DRAM peak {sheet.dram_gbps:,.0f} GB/s (data sheet)")
    return "\n".join(out)


def summary_roofline(nb, copy, points):
    """The summary's roofline: `points` are (measurement, FLOP per element, elements). The records count
    bytes only; the FLOP follow from the formulas, counting each operation (an exponential too) once."""
    placed = [dataclasses.replace(m, flops=float(per * n)) if m.ok else m for m, per, n in points]
    if nb.spec is None or not nb.spec.dram_gbps or not all(p.ok for p in placed):
        print("no recorded results for this GPU to place on a roofline")
        return None
    return plots.roofline(nb.spec, placed, measured_bandwidth=copy.gbps if copy.ok else None,
                          title="Reductions on the roofline")


def check_warp_per_row(nb, sch, rows, live):
    """The exercise's checks: the loops bound as asked (rows/4 blocks, 4 rows a block on threadIdx.y, a warp
    a row on threadIdx.x), the kernel builds, and on a GPU (`live`) its sums match NumPy's."""
    loops = [sch.get(loop) for loop in sch.get_loops(sch.get_sblock("S"))]
    bound = [(int(l.extent), l.thread_binding.thread_tag) for l in loops if l.thread_binding is not None]
    assert bound == [(rows // 4, "blockIdx.x"), (4, "threadIdx.y"), (32, "threadIdx.x")], \
        f"the bound loops are {bound}: bind {rows // 4} blocks, 4 rows per block on threadIdx.y, " \
        "32 threads per row on threadIdx.x"
    nb.build(sch)
    if live:
        xs = np.random.default_rng(3).standard_normal((rows, 128), dtype=np.float32)
        sums = run(sch, [xs, np.empty(rows, "float32")])
        np.testing.assert_allclose(sums, xs.sum(axis=1), rtol=1e-4, atol=1e-4)
    return "Exercise: right"
