"""Plumbing of notebook 06 (MetaSchedule): its inputs and their float64 products, the committed tuning
databases, checking and timing a replayed kernel, the decisions of a trace, the tables of tuned
versus hand-written kernels and of the whole course, and the checks of its exercises. The design
spaces (the templates) are the lesson, so they stay in the notebook."""

from __future__ import annotations

import numpy as np
import tvm

from .bench import Measurement, recorded_measurements, relative_error, run as run_kernel
from .kernels import cuda_source
from .tuned import committed_database


def _plots():
    """helpers.plots on first use: it loads matplotlib, which a notebook's first cells do without."""
    from . import plots
    return plots


class Inputs:
    """The 4096^3 problems of notebook 06, seeded as it always was: fp32 A and B, then fp16 A and B
    from the same generator; C zeroed (fp32 for both); float64 products computed once, only where a
    kernel runs."""

    def __init__(self, n: int):
        rng = np.random.default_rng(0)
        self.a32 = rng.uniform(-1, 1, (n, n)).astype("float32")
        self.b32 = rng.uniform(-1, 1, (n, n)).astype("float32")
        self.a16 = rng.uniform(-1, 1, (n, n)).astype("float16")
        self.b16 = rng.uniform(-1, 1, (n, n)).astype("float16")
        self.fp32 = [self.a32, self.b32, np.zeros((n, n), "float32")]
        self.fp16 = [self.a16, self.b16, np.zeros((n, n), "float32")]
        self.flops = 2.0 * n**3
        self.bytes = {"fp32": 3 * n * n * 4, "fp16": 2 * n * n * 2 + n * n * 4}
        self._refs = {}

    def reference(self, key: str, a, b):
        """float64 A @ B, computed once per `key`."""
        if key not in self._refs:
            self._refs[key] = a.astype(np.float64) @ b.astype(np.float64)
        return self._refs[key]

    def small(self, m: int) -> list:
        """The top-left m x m corners of the fp32 inputs (the live tuning's problem), C zeroed."""
        return [self.a32[:m, :m].copy(), self.b32[:m, :m].copy(), np.zeros((m, m), "float32")]


def committed(nb, name: str):
    """The committed database `name` for this GPU, else the recorded GPU's; None (and a note) when absent."""
    path = committed_database(name, nb.spec.name if nb.live else None)
    if path is None:
        print(f"no committed database {name!r} for this GPU yet")
    return path


def decisions(best, kind: str = "SamplePerfectTile") -> list:
    """The decisions of a tuned trace's sampling instructions of one kind, in the trace's order."""
    return [d for inst, d in best.trace.decisions.items() if inst.kind.name == kind]


def rules_decisions(best) -> str:
    """The decisions of the schedule rules' fp32 sketch, in the numbers of notebooks 03/04."""
    tiles, picks = decisions(best), decisions(best, "SampleCategorical")
    (i0, i1, i2, i3, i4), (j0, j1, j2, j3, j4), (k0, k1, k2) = tiles
    piped = "software_pipeline_stage" in str(best.trace)
    return "\n".join([
        f"thread blocks          {i0} x {j0} = {i0 * j0}",
        f"virtual threads        {i1} x {j1} = {i1 * j1} (each thread computes for all of them)",
        f"C tile per block       {i1 * i2 * i3 * i4} x {j1 * j2 * j3 * j4}",
        f"C outputs per thread   {i1 * i3 * i4} x {j1 * j3 * j4} = {i1 * i3 * i4 * j1 * j3 * j4} registers",
        f"k per shared tile      {k1 * k2} ({k0} tiles)",
        f"vector loads (A, B)    {[1, 2, 3, 4][picks[0]]}, {[1, 2, 3, 4][picks[1]]} elements "
        "(a width that does not divide the tile falls back to scalar loads)",
        f"unroll depth           {[0, 16, 32, 64, 128, 256, 512, 1024][picks[-1]]}",
        "software pipeline      " + ("yes: cp.async loads, several k tiles in flight" if piped else "no")])


def fp32_template_tiles(best) -> str:
    """The decisions of notebook 06's fp32 template, as notebook 04's tiles."""
    (_, by), (_, bx), (_, vy), (_, vx), (_, tk) = decisions(best)
    return (f"tiles (ly, lx, by, bx, tk) = {(4 * vy, 4 * vx, by, bx, tk)}; notebook 04 chose (8, 8, 16, 16, 16)\n"
            f"{by * bx} threads per block, a {4 * vy * by} x {4 * vx * bx} C tile per block")


def sketch_intrinsics(sketches) -> str:
    """Each tensor-core sketch's length and the multiply intrinsic it tensorizes with."""
    out = []
    for i, sketch in enumerate(sketches):
        sync = [line.split('ann_val="')[1].rstrip('")') for line in str(sketch.trace).splitlines()
                if 'auto_tensorize", ann_val="' in line and "sync" in line]
        out.append(f"sketch {i}: {len(sketch.trace.insts)} instructions, multiplies with {sync[0]}")
    return "\n".join(out)


def rules_fp16_tiles(best) -> str:
    """The tiles the tensor-core schedule rule's best record chose, in warps and fragments."""
    (i0, i1, i2, i3, i4), (j0, j1, j2, j3, j4), (k0, k1, k2) = decisions(best)[:3]
    return (f"warps per block {i2} x {j2} = {i2 * j2}, each holding {i3 * i4} x {j3 * j4} accumulator fragments; "
            f"C tile per block {i2 * i3 * i4 * 16} x {j2 * j3 * j4 * 16}, k per shared tile {k1 * k2 * 16}\n"
            f"pipelined: {'software_pipeline' in str(best.trace)}")


def wmma_template_tiles(best) -> str:
    """The decisions of the WMMA template, beside notebook 05's own choice."""
    (_, fm), (_, fn), (_, wm), (_, wn), (_, kt), (_, ks) = decisions(best)
    return (f"warps {wm} x {wn}, fragments per warp {fm} x {fn}: a {16 * wm * fm} x {16 * wn * fn} C tile per block; "
            f"k tile {16 * kt}, {ks} fragment(s) per step\n"
            "notebook 05 chose warps 2 x 4, fragments 4 x 4 (a 128 x 256 tile), k tile 64, 1 fragment per step")


def mma_template_tiles(best) -> str:
    """The decisions of the mma.sync template."""
    (_, fm), (_, fn), (_, wm), (_, wn), (_, gm), (_, gn), (_, kt) = decisions(best)
    return (f"warps {wm} x {wn}, fragments per warp {fm} x {fn}: a {16 * wm * fm} x {16 * wn * fn} C tile per block; "
            f"groups of {gm} x {gn} blocks; k tile {32 * kt}")


def log_tail(run, lines: int = 6) -> None:
    """The last lines of MetaSchedule's own log of a tuning run."""
    log = run.log_file.read_text().splitlines()
    print(f"MetaSchedule's log: {len(log)} lines in {run.log_file.name}; the last ones:")
    print("\n".join(log[-lines:]))


def measure_live(nb, name: str, run, inputs: Inputs, m: int, baseline: Measurement):
    """Check and time the best kernel a live tuning run found (an m^3 fp32 matmul) beside cuBLAS;
    without a GPU, show its record."""
    if run is not None and run.best is not None:
        args = inputs.small(m)
        return nb.measure(name, run.best.sch, args, lambda: inputs.reference("small", *args[:2]),
                          flops=2.0 * m**3, bytes=3 * m * m * 4, tol=1e-4, baseline=baseline)
    if not nb.live:
        print(nb.record(name, None))
    return None


def measure_tuned(nb, name: str, best, inputs: Inputs, key: str, baseline: Measurement):
    """Check and time a replayed kernel on the `key` ("fp32" or "fp16") problem beside cuBLAS. A kernel
    tuned on another GPU may need what this one lacks (cp.async, more shared memory): then its
    recorded result is shown, and the live tuning cell tunes one for this GPU."""
    if best is None:
        return None
    if not nb.can_run(best.sch, "its result as recorded on the GPU it was tuned for is shown"):
        m = nb.recorded_or_live(name)
        print(m or f"{name}: no recorded result")
        return m
    args = getattr(inputs, key)
    return nb.measure(name, best.sch, args, lambda: inputs.reference(key, *args[:2]), flops=inputs.flops,
                      bytes=inputs.bytes[key], tol=1e-4, baseline=baseline)  # in rounds alternating with cuBLAS's


def _recorded(nb, notebook: str) -> list[Measurement]:
    """Every measurement recorded by `notebook` on this GPU (without one, on the GPU whose records this
    session's notebook shows), else on the GPU whose records `notebook` shows."""
    return recorded_measurements(notebook, nb.records_gpu)


HAND = [("03_matmul_local_blocking", "float32"), ("04_matmul_shared_blocking", "float32"),
        ("05_tensor_core_tensorization", "float16")]


def tuned_versus_hand(nb, flops: float, cublas: list[Measurement]) -> str:
    """The best 4096^3 kernel of notebooks 03, 04 and 05 (from their records) and this session's tuned
    kernels, each against cuBLAS of its own data type: in rounds alternating with it where it was so
    timed ("~": worked out from the ratio), else the one of `cublas` at its size."""
    def best_of(notebook, dtype):
        ms_ = [m for m in _recorded(nb, notebook)
               if m.ok and m.ms and m.flops == flops and m.dtype == dtype and not m.name.startswith("cuBLAS")]
        return min(ms_, key=lambda m: m.ms) if ms_ else None

    def vs_cublas(m):
        if not (m.ok and m.tflops):
            return "-"
        if m.ratio:
            return f"{m.ratio:.0%} of {'' if m.baseline_ms else '~'}{m.rounds_baseline_ms:.3f} ms"
        bases = [c for c in cublas if c.ok and c.dtype == m.dtype and c.flops == m.flops]
        return f"{m.of(bases[0]):.0%} of {bases[0].ms:.3f} ms" if bases else "-"

    rows = [m for m in (best_of(notebook, dtype) for notebook, dtype in HAND) if m]
    tuned = [m for m in nb.results if m.name.startswith("MetaSchedule")]
    lines = [f"{'kernel':52s} {'dtype':8s} {'ms':>8s} {'TFLOP/s':>8s}  vs cuBLAS"]
    for m in rows + tuned:
        if m.ok:
            lines.append(f"{m.name[:52]:52s} {m.dtype or '':8s} {m.ms:8.3f} {m.tflops:8.1f}  {vs_cublas(m)}")
        else:
            lines.append(f"{m.name[:52]:52s} {'':8s} {'-':>8s} {'-':>8s}  (no record)")
    return "\n".join(lines)


COURSE = ["01_vector_add", "02_window_sum", "03_matmul_local_blocking", "04_matmul_shared_blocking",
          "05_tensor_core_tensorization", "06_metaschedule_tuning"]


class _Course:
    """Every kernel recorded by notebooks 01-06, judged as the course judges them: a matmul as a share
    of cuBLAS of its data type and size (the cuBLAS run it was timed against, else any of that size),
    a streaming kernel of 01 and 02 as a share of the fastest copy notebook 00 measured."""

    def __init__(self, nb):
        series = {name: _recorded(nb, name) for name in COURSE}
        for name, ms_ in series.items():
            if not ms_:
                print(f"{name}: no recorded results (run it on a GPU with COURSE_RECORD=1 to record them)")
        self.everything = [m for ms_ in series.values() for m in ms_ if m.ok and m.ms]
        self.blas = {(m.dtype, m.flops): m for m in self.everything if m.name.startswith("cuBLAS")}
        self.timed_against = {(m.notebook, m.name): m for m in self.everything if m.name.startswith("cuBLAS")}
        copies = [m for m in _recorded(nb, "00_gpu_architecture") if m.name.startswith("copy") and m.gbps]
        ceiling = max((m.gbps for m in copies), default=None)
        self.ceiling_label = "of the copy ceiling" if ceiling else "of DRAM peak"
        self.ceiling = ceiling or (nb.spec.dram_gbps if nb.spec is not None else None)

    @staticmethod
    def memory_bound(m):
        return m.notebook in ("01_vector_add", "02_window_sum")

    def base(self, m):
        return self.timed_against.get((m.notebook, m.versus)) or self.blas.get((m.dtype, m.flops))

    def share(self, m):
        if self.memory_bound(m):
            return m.gbps / self.ceiling if m.gbps and self.ceiling else 0
        base = self.base(m)
        return (m.of(base) or 0) if base and m.tflops else 0

    def versus(self, m):
        if not self.share(m):
            return ""
        if self.memory_bound(m):
            return f"{self.share(m):.0%} {self.ceiling_label} ({self.ceiling:,.0f} GB/s)"
        ms = m.rounds_baseline_ms or self.base(m).ms
        return f"{self.share(m):.0%} of cuBLAS at {'~' if m.ratio and not m.baseline_ms else ''}{ms:.4f} ms"

    def table(self) -> str:
        best = [m for name in COURSE  # the two best of each notebook
                for m in sorted((m for m in self.everything if m.notebook == name and not m.name.startswith("cuBLAS")),
                                key=self.share, reverse=True)[:2]]
        table = [f"{'nb':3s} {'kernel':48s} {'ms':>8s} {'rate':>15s}  vs"]
        for m in best:
            rate = (f"{m.gbps:,.0f} GB/s" if self.memory_bound(m) and m.gbps
                    else (f"{m.tflops:,.2f} TFLOP/s" if m.tflops else ""))
            table.append(f"{m.notebook[:2]:3s} {m.name[:48]:48s} {m.ms:8.4f} {rate:>15s}  {self.versus(m)}")
        head = f"recorded on {self.everything[0].gpu} (TVM {self.everything[0].tvm}); the two best kernels of each notebook:"
        return "\n".join([head] + table)


def course_page(nb, flops: float):
    """The whole course on one page: the two best kernels of each notebook 01-06 (printed), and every
    kernel on one roofline at its minimal DRAM traffic (03 and 04 record requested bytes)."""
    course = _Course(nb)
    if course.everything:
        print(course.table())
    on_roof = [m.at_minimal_traffic() for m in course.everything if m.flops and m.bytes and m.tflops]
    if on_roof and nb.spec is not None and nb.spec.dram_gbps:
        return _plots().roofline(nb.spec, on_roof, tensor_core=True,
                              measured_compute={m.name: m.tflops for m in course.blas.values() if m.flops == flops})
    print("no recorded kernels to place on the roofline yet")
    return None


# ------------------------------------------------------------------ the exercises, checked


def check_design_space(space) -> str:
    """Exercise 2: `space(sch)` samples both tiles of a 64^3 matmul and splits by them. Applied with
    eight random states: the loops must follow the trace's decisions, each sample must compute the
    product (on the CPU), and the draws must differ."""
    from .tuning import matmul_workload

    tiny = matmul_workload(64, 64, 64, "float32")
    a3, b3 = np.random.default_rng(3).uniform(-1, 1, (2, 64, 64)).astype("float32")
    seen = set()
    for seed in range(1, 9):
        sch = tvm.s_tir.Schedule(tiny, seed=seed)
        space(sch)
        tiles = [tuple(map(int, d)) for i, d in sch.trace.decisions.items() if i.kind.name == "SamplePerfectTile"]
        extents = [int(sch.get(loop).extent) for loop in sch.get_loops(sch.get_sblock("C"))]
        if len(tiles) != 2:
            return f"not right: the trace holds {len(tiles)} sample_perfect_tile decisions, not 2"
        (i0, i1), (j0, j1) = tiles
        seen.add(tuple(tiles))
        if extents != [i0, j0, 64, i1, j1]:
            return f"not right: decisions {tiles} but loops {extents}: split by the draws, then reorder"
        c3 = tvm.runtime.tensor(np.zeros((64, 64), "float32"))
        tvm.compile(sch.mod, target="llvm")["main"](tvm.runtime.tensor(a3), tvm.runtime.tensor(b3), c3)
        if not np.allclose(c3.numpy(), a3.astype(np.float64) @ b3, rtol=1e-5, atol=1e-5):
            return f"not right: wrong result with tiles {tiles}"
    if len(seen) < 2:
        return "not right: every seed drew the same tiles: is something sampled at all?"
    return f"correct: {len(seen)} different tilings, each checked against NumPy"


def _blocks(sch) -> list[str]:
    return [sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock("root"))]


def _loop_plan(sch, block: str) -> list:
    """(extent, thread binding or loop kind; unrolled counts as serial) of each loop above `block`, or
    above `block`_update once its initialization is split off."""
    plan = []
    block = block if block in _blocks(sch) else f"{block}_update"
    for loop in sch.get_loops(sch.get_sblock(block)):
        rv = sch.get(loop)
        bound = rv.thread_binding is not None
        kind = rv.thread_binding.thread_tag if bound else tvm.tirx.ForKind(rv.kind).name
        plan.append((int(rv.extent), "SERIAL" if kind == "UNROLLED" else kind))
    return plan


def check_tuned_tiling(sch, best, inputs: Inputs | None = None) -> None:
    """Exercise 3: `sch`, the student's schedule, must tile C as the tuned kernel `best` does (the same
    loops, extents and bindings, from the thread blocks down), keep C's accumulators in registers
    copied out per thread, and build; an AssertionError says what differs. Given `inputs` (on a GPU),
    it must also compute the fp32 product."""
    assert best is not None, "no tuned fp32 record to check against"
    mine, theirs = _loop_plan(sch, "C"), _loop_plan(best.sch, "C")
    assert mine == theirs, f"C's loops are {mine}; the tuned kernel's are {theirs}: check the factors and the order"
    assert "C_local" in _blocks(sch), "no C_local block: accumulate in registers with cache_write(block, 0, 'local')"
    copy_out = [kind for _, kind in _loop_plan(sch, "C_local")[:3]]
    assert copy_out == ["blockIdx.x", "vthread.x", "threadIdx.x"], \
        f"C_local's first loops are {copy_out}: reverse_compute_at it under the threadIdx.x loop"
    bounds = [cuda_source(s).split("__launch_bounds__(")[1].split(")")[0] for s in (sch, best.sch)]
    assert bounds[0] == bounds[1], f"{bounds[0]} threads per block, the tuned kernel {bounds[1]}"
    if inputs is not None:
        # the course's measure of error (as nb.measure's): norm of the difference over norm of the product;
        # elementwise tolerances fail on entries that 4096 terms cancel to nearly zero
        err = relative_error(run_kernel(sch, inputs.fp32), inputs.reference("fp32", inputs.a32, inputs.b32))
        assert err <= 1e-5, f"relative error {err:.1e} against NumPy (at most 1e-5): the kernel computes something else"
