"""Plumbing of the fp32 matmul ladders (notebooks 03 and 04): the seeded inputs, the float64
reference, the bytes a schedule requests, the NumPy and cuBLAS baselines, tile sweeps and the tables
read from the profiling studies. The schedules are the lesson, so they stay in the notebooks: every
function here takes the kernel (or a function that builds it) from the notebook.

    bench = matmul_ladder.Bench(nb, [SQUARE, RECT, ODD])
    m = bench.run("1D threads", threads_1d(*RECT), RECT)
"""

from __future__ import annotations

import functools
import itertools
import time

import numpy as np

from .bench import Measurement
from .records import experiment_table


def _plots():
    """helpers.plots on first use: it loads matplotlib, which a notebook's first cells do without."""
    from . import plots
    return plots


def label(shape) -> str:
    """4096x4096x4096: how a measurement names its shape."""
    return "x".join(map(str, shape))


def requested_bytes(shape, rows: int = 1, cols: int = 1) -> float:
    """Bytes a schedule asks global memory for when each of its tiles of C (a thread's in notebook 03,
    a block's in 04) is rows x cols: every element of A fetched N / cols times, of B M / rows times,
    C written once."""
    M, N, K = shape
    return 4.0 * (M * N * K / cols + M * N * K / rows + M * N)


class Bench:
    """The inputs of every shape (seeded as the notebooks always were), their float64 products
    (computed once, only where a kernel runs) and cuBLAS fp32 at the `timed` shapes."""

    def __init__(self, nb, shapes, timed=None):
        self.nb = nb
        rng = np.random.default_rng(0)
        self.inputs = {}
        for M, N, K in shapes:
            a = rng.uniform(size=(M, K)).astype("float32")
            b = rng.uniform(size=(K, N)).astype("float32")
            self.inputs[(M, N, K)] = [a, b, np.zeros((M, N), "float32")]
        self.cublas = {shape: nb.cublas_matmul(*shape) for shape in (timed or shapes[:2])}

    @functools.cache
    def reference(self, shape):
        a, b, _ = self.inputs[shape]
        return a.astype("float64") @ b.astype("float64")

    def run(self, name, sch, shape, tiles=None, *, rows=1, cols=1, **kw) -> Measurement:
        """Check and time `sch` (or show its record) as "<name> <shape>", beside cuBLAS in alternating
        rounds; `tiles` = (ly, lx, by, bx, tk) counts the bytes of a block tile (notebook 04), `rows`
        and `cols` those of a thread tile (notebook 03)."""
        if tiles:
            rows, cols = tiles[0] * tiles[2], tiles[1] * tiles[3]
        M, N, K = shape
        kw.setdefault("repeat", 10)
        kw.setdefault("baseline", self.cublas.get(shape))  # timed in rounds alternating with cuBLAS's
        return self.nb.measure(f"{name} {label(shape)}", sch, self.inputs[shape], lambda: self.reference(shape),
                               flops=2.0 * M * N * K, bytes=requested_bytes(shape, rows, cols), traffic="requested",
                               tol=1e-4, **kw)

    def numpy_cpu(self, shapes):
        """NumPy's fp32 product on the host CPU (timed where the GPU runs, else the record), printed."""
        for shape in shapes:
            M, N, K = shape
            name = f"NumPy CPU fp32 {label(shape)}"
            if self.nb.live:  # time the CPU too, on the machine that has the GPU
                a, b, _ = self.inputs[shape]
                times = []
                for _ in range(3):
                    t0 = time.perf_counter()
                    a @ b
                    times.append((time.perf_counter() - t0) * 1e3)
                m = self.nb.record(name, float(np.median(times)), flops=2.0 * M * N * K, on_cpu=True)
            else:
                m = self.nb.record(name, 0.0)
            print(m)

    def best(self, measured: dict, default):
        """The key of the fastest measurement that ran (or has a record) in `measured`, else `default`."""
        done = {key: m for key, m in measured.items() if m is not None and m.ok}
        return max(done, key=lambda key: done[key].tflops) if done else default

    def heatmap(self, build, shape, rows, cols):
        """Notebook 04's tile sweep: `build(tiles)` for every (ly, lx, by, bx) in `rows` and tk in
        `cols`, measured quietly; returns {tiles: measurement} and draws TFLOP/s as a heatmap."""
        heat = np.full((len(rows), len(cols)), np.nan)
        measured = {}
        for (r, (ly, lx, by, bx)), (c, tk) in itertools.product(enumerate(rows), enumerate(cols)):
            tiles = (ly, lx, by, bx, tk)
            m = measured[tiles] = self.run(f"sweep {tiles}", build(tiles), shape, tiles, quiet=True)
            if m.ok:
                heat[r, c] = m.tflops
        row_labels = [f"{ly}x{lx} x {by}x{bx} thr ({by * ly}x{bx * lx})" for ly, lx, by, bx in rows]
        _plots().heatmap(heat, row_labels, cols, xlabel="k tile tk", ylabel="thread tile x threads (block tile)",
                      title=f"Shared-memory blocking at {label(shape)}: TFLOP/s", source=measured.values())
        return measured

    def at_size(self, shape, kernel):
        """(the kernel, cuBLAS) at one size, beside each other: both timed live on a GPU (cuBLAS replayed
        from a CUDA graph, as small problems take less time than a call from Python), else the kernel
        built and both records shown."""
        M, N, K = shape
        names = f"final kernel {label(shape)}", f"cuBLAS float32 {label(shape)} (CUDA graph)"
        if not self.nb.live:
            self.nb.build(kernel)  # it still builds at every size
            return tuple(self.nb.recorded_or_live(n) or Measurement(n, None, source="missing") for n in names)
        rng = np.random.default_rng(1)
        a, b = rng.uniform(size=(M, K)).astype("float32"), rng.uniform(size=(K, N)).astype("float32")
        blas = self.nb.cublas_matmul(*shape, graph=True, name=names[1], quiet=True)
        m = self.nb.measure(names[0], kernel, [a, b, np.zeros((M, N), "float32")],
                            lambda: a.astype("float64") @ b.astype("float64"), flops=2.0 * M * N * K, tol=1e-4,
                            repeat=10, baseline=blas, quiet=True)
        return m, blas


def by_size_table(by_size: dict):
    """Notebook 04's kernel against cuBLAS at every size: the printed table and the chart."""
    labels = [f"{s[0]}³" if len(set(s)) == 1 else label(s) for s in by_size]
    print(f"{'size':>14s} {'kernel':>8s} {'cuBLAS':>8s}  TFLOP/s; kernel vs cuBLAS")
    for size, (m, blas) in zip(labels, by_size.values()):
        rates = "".join(f"{x.tflops:>9.1f}" if x.ok else f"{'-':>9s}" for x in (m, blas))
        print(f"{size:>14s}{rates}" + (f"  {m.of(blas):.0%}" if m.of(blas) else ""))
    return _plots().sweep(labels, dict(zip(["final kernel", "cuBLAS fp32"], zip(*by_size.values()))),
                       xlabel="M x N x K", metric="tflops", title="fp32 matmul by size")


def k_loop_summary(src: str) -> str:
    """What the lines of the generated CUDA's k_0 loop do, in order, one line per run of lines that do
    the same: global loads, barriers, shared loads and multiply-adds, shared stores."""
    def step(line):  # None: a loop's own line
        if line.startswith(("for (", "}")):
            return None
        if "__syncthreads" in line:
            return "__syncthreads()"
        if "(A_ptr" in line or "(B_ptr" in line:
            return "next tiles: global memory -> registers"
        if "= A_local_ptr[" in line or "make_int4" in line or line.startswith(("A_shared_ptr[", "B_shared_ptr[")):
            return "next tiles: registers -> shared memory"
        return "this tile: shared memory -> registers, multiply-adds"

    lines = src.splitlines()
    start = next(i for i, line in enumerate(lines) if "for (int k_0" in line)
    indent = lines[start][:len(lines[start]) - len(lines[start].lstrip())]
    end = lines.index(indent + "}", start)  # the loop's closing brace
    body = [line.strip() for line in lines[start + 1:end] if step(line.strip())]
    out = [lines[start].strip()]
    out += [f"    {what:52s} {len(list(group)):5d} lines" for what, group in itertools.groupby(body, key=step)]
    return "\n".join(out + ["}"])


def profile_table() -> str:
    """Nsight Compute's view of 04's kernels before and with the register prefetch, and cuBLAS's
    (the study 03_04_matmul.py profile)."""
    _, title, rows = experiment_table("03_04_matmul.profile", "fp32 (cuBLAS")
    shown = ("TFLOP/s", "grid x block", "registers / thread", "achieved occupancy", "FMA pipe busy", "issue slots busy",
             "warp cycles per issued", "top stalls", "shared bank conflicts, stores", "L2 hit rate")
    rows = [["", "2 stages", "through registers", "cuBLAS"]] + [row for row in rows if row[0].startswith(shown)]
    stalls = rows.pop(next(i for i, row in enumerate(rows) if row[0].startswith("top stalls")))
    out = [title, _plots().text_table(rows)]
    out += [f"{'top stalls, ' + kernel:30s}  {stall}" for kernel, stall in zip(rows[0][1:], stalls[1:])]
    return "\n".join(out)


def fp32_limit_table() -> str:
    """cuBLAS's thread tile copied in TensorIR (the study 03_04_matmul.py fp32-limit)."""
    rows = experiment_table("03_04_matmul.fp32-limit", "fp32 4096x4096x4096; cuBLAS")[2]
    shown = ("variant", "04's best", "128x128, 128 threads of 16x8, tk 16", "128x128, 128 threads of 8x16, tk 16")
    return _plots().text_table([[row[0].replace("04's best: ", "section 7's "), row[2], row[4], row[6]]
                             for row in rows if row[0].startswith(shown)])


# ------------------------------------------------------------------ notebook 04's exercises, checked


def check_row_padding(answer_unpadded, answer_padded, conflict_degree, tx) -> str:
    """Exercise 1 of notebook 04: a warp's 16 threads read row 0 of a 128-float B tile at column
    16 * tx, and row 1 of the tile padded to 132 floats."""
    if answer_unpadded is ... or answer_padded is ...:
        return "Exercise 1: not answered yet"
    truth = conflict_degree([16 * x for x in tx]), conflict_degree([132 + 16 * x for x in tx])
    if (answer_unpadded, answer_padded) == truth:
        return (f"correct: {truth[0]}-way unpadded, {truth[1]}-way padded: padding between rows cannot help threads "
                "that read the same row")
    return "not yet: list the banks (16 * tx) % 32; padding changes the stride between rows, not within one"


#: (bm, bn, tk, stages) -> bytes, with bm != bn so that a formula mixing them up shows
SHARED_POINTS = {(128, 128, 8, 1): 8192, (64, 128, 8, 1): 6144, (128, 32, 16, 2): 20480, (32, 64, 16, 3): 18432}


def check_shared_bytes(shared_bytes) -> str:
    """Exercise 2 of notebook 04: `shared_bytes(bm, bn, tk, stages)` at block tiles of unequal sides."""
    if shared_bytes(1, 1, 1) is ...:
        return "Exercise 2: not answered yet"
    ok = all(shared_bytes(*point) == want for point, want in SHARED_POINTS.items())
    return "correct" if ok else "not yet: 4 bytes x (bm*tk + tk*bn) x stages"


def check_three_stages(sch, config) -> None:
    """Exercise 3 of notebook 04: a three-stage cp.async pipeline of the (8, 8, 16, 16, 8) tiles; an
    AssertionError says what is wrong."""
    from . import kernels
    import tvm

    k0 = sch.get(sch.get_loops(sch.get_sblock("C_update"))[6])
    stages = [int(s) for s in k0.annotations.get("software_pipeline_stage", [])]
    assert stages == [0, 0, 2], f"software_pipeline_stage is {stages}: the fetches in stage 0, the compute in stage 2"
    asynchronous = [int(s) for s in k0.annotations.get("software_pipeline_async_stages", [])]
    assert asynchronous == [0], f"software_pipeline_async_stages is {asynchronous}: stage 0, the fetches, as cp.async"
    with tvm.transform.PassContext(config=config):
        src = kernels.cuda_source(sch)
    shared = " ".join(line.strip() for line in src.splitlines() if "__shared__" in line)
    assert "A_shared_ptr[4608]" in shared and "B_shared_ptr[3168]" in shared, \
        f"three buffers of the (8, 8, 16, 16, 8) tiles expected, the kernel declares: {shared}"
