"""Variants of a kernel, as a study's table lists them: build each (`dry_run` without a GPU), check
it against a reference, time it, and print the table. Results are `helpers.Measurement`s, as the
notebooks' own; a variant that was not timed keeps why in its `params["note"]`.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable

import numpy as np
import tvm

import helpers
from helpers import baselines
from helpers.bench import Measurement
from study import error_line, table


@dataclasses.dataclass
class Variant:
    """One schedule in a study's table: `make()` returns its Schedule (or IRModule), built under
    the compiler options `pass_config` through the TIR pipeline named `pipeline`, for `arch` when
    the kernel exists on one target only (a Hopper kernel: "sm_90a"), else for the target given."""

    name: str
    make: Callable[[], object]
    shape: tuple[int, ...] = ()
    pass_config: dict = dataclasses.field(default_factory=dict)
    pipeline: str = "default"
    arch: str | None = None

    def build(self, target=None):
        """The schedule and its executable for `arch`, else `target` (default: this GPU)."""
        sch = self.make()
        with tvm.transform.PassContext(config=self.pass_config):
            return sch, helpers.build(sch, self.arch or target, tir_pipeline=self.pipeline)

    def label(self, with_shape: bool) -> str:
        return f"{self.name} {'x'.join(map(str, self.shape))}" if with_shape else self.name


# the instructions the studies vary, as the kernels' CUDA spells them (cp.async through TVM's helpers)
CUDA_FEATURES = {"wmma": ("wmma::",), "mma.sync": ("mma.sync",), "ldmatrix": ("ldmatrix",),
                 "cp.async": ("cp.async.c", "cp_async_legacy", "cp_async_wait"), "wgmma": ("mma_async",),  # TIRx calls PTX helpers
                 "TMA": ("cp_async_bulk_tensor",)}  # named after their instruction: tvm_builtin_ptx_...


def describe_cuda(src: str) -> str:
    """The length of a kernel's CUDA and which of the tensor-core and async-copy instructions it uses."""
    kernels = src[src.find('extern "C" __global__'):]  # past the preamble TVM puts before every kernel
    found = [name for name, spellings in CUDA_FEATURES.items() if any(s in kernels for s in spellings)]
    return f"{len(kernels.splitlines())} lines of CUDA" + (f", uses {', '.join(found)}" if found else "")


def several_shapes(variants) -> bool:
    return len({v.shape for v in variants if len(v.shape) > 1}) > 1


def only(variants: list[Variant], substring: str | None) -> list[Variant]:
    """The variants whose name holds `substring` (all of them without one)."""
    return [v for v in variants if not substring or substring in v.name]


ONLY = (("--only",), dict(metavar="TEXT", help="only the variants whose name contains TEXT"))


def dry_run(variants: list[Variant], describe: Callable[[Variant, str], str] | None = None) -> int:
    """Build every variant for sm_90 (or its own `arch`) without a GPU: each schedule is valid and
    TVM can compile it. One line per variant, which `describe(variant, cuda)` may extend (say,
    with what the machine code holds); exit status 1 if any failed."""
    t0, failed = time.time(), 0
    with_shape = several_shapes(variants)
    width = max((len(v.label(with_shape)) for v in variants), default=0)
    for v in variants:
        t = time.time()
        try:
            _, ex = v.build(helpers.listing_target())
            source = ex.mod.imports[0].inspect_source()
            note = f"built in {time.time() - t:.1f} s, {describe_cuda(source)}"
            if describe:
                note += f"; {describe(v, source)}"
        except Exception as err:  # noqa: BLE001 (report it, build the rest)
            failed += 1
            note = f"FAILED {error_line(err)}"
        print(f"{v.label(with_shape):{width}s}  {note}", flush=True)
    print(f"dry run: {len(variants) - failed} of {len(variants)} variants built, {failed} failed, "
          f"{time.time() - t0:.0f} s")
    return 1 if failed else 0


class MatmulCheck:
    """One matmul shape on the GPU: A (M x K) and B (K x N, or N x K when `b_transposed`) of
    uniform(-1, 1) values in `dtype` (seed 0), a C (float32 unless `out_dtype`) poisoned with NaN
    before every first run, and a reference C that torch computes on the GPU in `precision`:
    "float32" with TF32 off (what an fp32 kernel must match) or "float64"."""

    def __init__(self, shape, dtype: str, b_transposed: bool, precision: str, out_dtype: str = "float32"):
        import torch

        M, N, K = self.shape = shape
        rng = np.random.default_rng(0)
        a = rng.uniform(-1, 1, (M, K)).astype(dtype)
        b = rng.uniform(-1, 1, (N, K) if b_transposed else (K, N)).astype(dtype)
        self.dev = helpers.device()
        self.args = [tvm.runtime.tensor(x, self.dev) for x in (a, b, np.zeros((M, N), out_dtype))]
        self.nan = np.full((M, N), np.nan, out_dtype)
        torch.backends.cuda.matmul.allow_tf32 = False
        ta, tb = (torch.from_numpy(x).cuda().to(getattr(torch, precision)) for x in (a, b))
        self.ref = (ta @ (tb.T if b_transposed else tb)).double()
        self.ref_norm = float(self.ref.norm())

    def run(self, ex) -> tuple[float, float]:
        """Run the kernel once on the poisoned C: the wall time of that run (ms) and C's relative error."""
        import torch

        self.args[2].copyfrom(self.nan)
        t = time.time()
        ex.mod["main"](*self.args)
        self.dev.sync()
        first_ms = (time.time() - t) * 1e3
        out = torch.from_dlpack(self.args[2]).double()
        return first_ms, float((out - self.ref).norm()) / self.ref_norm


def _result(v: Variant, ms: float | None = None, err: float | None = None, note: str = "") -> Measurement:
    """A variant's row of a matmul table: its time, rate and error, and why it was not timed."""
    return Measurement(v.name, ms, err, flops=2.0 * float(np.prod(v.shape)), shape=list(v.shape),
                       params={"note": note} if note else None)


def _note(m: Measurement) -> str:
    return (m.params or {}).get("note", "")


def measure_matmuls(variants: list[Variant], check: Callable[[tuple], MatmulCheck], tol: float,
                    timing: Callable[[float], dict], deadline: float = float("inf")) -> list[Measurement]:
    """Build each variant for this GPU, run it once against the reference and, if its relative
    error is within `tol`, time it with `helpers.time_function(**timing(first run's ms))`.
    Variants not started by `deadline` (time.time()) are skipped; failures are reported, not fatal."""
    results, data = [], None
    with_shape = several_shapes(variants)
    for v in variants:
        label = v.label(with_shape)
        if time.time() > deadline:
            results.append(_result(v, note="skipped (time budget)"))
            continue
        t = time.time()
        try:
            _, ex = v.build()
            if data is None or data.shape != v.shape:
                data = None  # free one shape's arrays before making the next
                data = check(v.shape)
            first_ms, err = data.run(ex)
            if not err <= tol:
                results.append(_result(v, err=err, note="WRONG, not timed"))
                print(f"{label}: WRONG, relative error {err:.2e}", flush=True)
                continue
            times = helpers.time_function(ex.mod, data.dev, data.args, **timing(first_ms))
            results.append(_result(v, statistics.median(times), err))
            print(f"{label}: {results[-1].ms:.4f} ms, {results[-1].tflops:.2f} TFLOP/s, error {err:.1e} "
                  f"({time.time() - t:.1f} s)", flush=True)
        except Exception as err:  # noqa: BLE001 (report it, measure the rest)
            results.append(_result(v, note=f"FAILED {error_line(err)}"))
            print(f"{label}: FAILED {error_line(err)}", flush=True)
    return results


def matmul_table(results: list[Measurement], baseline_ms: dict, title: str | None = None) -> None:
    """Print one row per variant under `title`: time, TFLOP/s, relative error and % of the cuBLAS time
    of its shape."""
    with_shape = len({tuple(r.shape) for r in results if len(r.shape) > 1}) > 1
    rows = [["variant", *(["shape"] if with_shape else []), "ms", "TFLOP/s", "rel err", "% cuBLAS", "note"]]
    for r in results:
        shape = ["x".join(map(str, r.shape))] if with_shape else []
        blas = baseline_ms.get(tuple(r.shape))
        rows.append([r.name, *shape, f"{r.ms:.4f}" if r.ms else "-", f"{r.tflops:.1f}" if r.ms else "-",
                     f"{r.rel_err:.1e}" if r.rel_err is not None else "-", f"{blas / r.ms:.1%}" if r.ms and blas else "-",
                     _note(r)])
    table(rows, title)
    skipped = sum(_note(r).startswith("skipped") for r in results)
    if skipped:
        print(f"{skipped} variants skipped for time")


def fp16_matmuls_beside_cublas(variants: list[Variant], n: int) -> int:
    """On this GPU: cuBLAS fp16 at n^3, then every variant checked against float64 (relative error
    within 1e-3) and timed, in one table with each as a percentage of that cuBLAS time."""
    blas = helpers.cublas_time(n, n, n, "float16")
    print(f"{helpers.local_gpu_spec().name}: cuBLAS float16 {blas:.4f} ms, {2.0 * n**3 / blas / 1e9:,.1f} TFLOP/s",
          flush=True)
    results = measure_matmuls(variants, lambda shape: MatmulCheck(shape, "float16", False, "float64"), 1e-3,
                              lambda _: dict(repeat=30))
    matmul_table(results, {(n, n, n): blas})
    return 0


def beside_cublas(variants: list[Variant], data_for: Callable[[Variant], MatmulCheck],
                  blas_for: Callable[[Variant], Callable[[], float]], tol: float, title: str,
                  extra: tuple[str, Callable[[Variant, object], str]] | None = None, rounds: int = 15) -> int:
    """Each variant checked on `data_for(v)` (relative error within `tol`), then timed in `rounds`
    rounds alternating with `blas_for(v)`'s: the median of the per-round ratios, as the notebooks
    report "% of cuBLAS". Prints each row as it comes, then the table under `title`; `extra`
    (a column's name, and its text from the variant and its schedule) adds a column."""
    rows = [["variant", "ms", "TFLOP/s", "rel err", "% cuBLAS (interleaved)", "cuBLAS ms"]
            + ([extra[0]] if extra else [])]
    none = ["-"] * (len(rows[0]) - 5)  # the columns a failed variant leaves empty after its verdict
    for v in variants:
        try:
            sch, ex = v.build()
            data = data_for(v)
            _, err = data.run(ex)
            if not err <= tol:
                rows.append([v.name, "-", "-", f"{err:.1e}", "WRONG, not timed"] + none)
                continue
            helpers.time_function(ex.mod, data.dev, data.args, repeat=1)  # warm up
            kernel_ms, blas_ms, ratio = baselines.interleaved(
                lambda: helpers.time_function(ex.mod, data.dev, data.args, repeat=1, warmup=0)[0], blas_for(v), rounds)
            ms = statistics.median(kernel_ms)
            rows.append([v.name, f"{ms:.4f}", f"{2 * np.prod(v.shape) / ms / 1e9:.2f}", f"{err:.1e}", f"{ratio:.1%}",
                         f"{statistics.median(blas_ms):.4f}"] + ([extra[1](v, sch)] if extra else []))
        except Exception as err:  # noqa: BLE001 (report it, measure the rest)
            rows.append([v.name, "-", "-", "-", f"FAILED {error_line(err, 80)}"] + none)
        print(" | ".join(rows[-1]), flush=True)
    print()
    table(rows, f"{title}, cuBLAS timed in {rounds} rounds alternating with each kernel's")
    return 0


def print_ptxas(results: list[Measurement], variants: list[Variant], count: int,
                title: str = "the fastest variants") -> None:
    """What ptxas made of the `count` fastest of `results` (registers, shared memory, spills), each
    built from its variant in `variants`; needs nvcc."""
    fastest = sorted((r for r in results if r.ms), key=lambda r: r.ms)[:count]
    if not (fastest and helpers.nvcc_path()):
        return
    made = {(v.name, tuple(v.shape)): v for v in variants}
    print(f"\nptxas (sm_90) of {title}:")
    for r in fastest:
        v = made[r.name, tuple(r.shape)]
        try:
            with tvm.transform.PassContext(config=v.pass_config):
                for report in helpers.ptxas_report(v.make(), helpers.listing_target()):
                    print(f"  {v.name}: {report}")
        except Exception as err:  # noqa: BLE001
            print(f"  {v.name}: ptxas failed: {error_line(err)}")
