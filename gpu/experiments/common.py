"""What the experiment scripts share: the command line, building and measuring tables of variants,
reading code out of the notebooks, and a few schedule pieces used by more than one notebook topic.

Each script is a set of *studies*, named by its first argument:

    python gpu/experiments/05_tensor_cores.py pipeline          # on a GPU: build, check, time
    python gpu/experiments/05_tensor_cores.py pipeline --dry    # anywhere: only build every variant

A live run also writes everything it prints to `results/<script>.<study>.txt` beside this file
(to `$OUT/` instead when `$OUT` is set, as on the project's GPU machine), headed by the GPU, the
date, TVM's version and the command, so a committed result always says how to make it again.
Scripts are named after notebooks and start with a digit, which `import` cannot spell: this
module is the one place they share code.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import csv
import dataclasses
import datetime
import importlib.util
import io
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

import helpers
from helpers import baselines

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = HERE / "results"
NOTEBOOKS = ROOT / "notebooks"


# ------------------------------------------------------------------ the command line


@dataclasses.dataclass
class Study:
    """One study of a script: `run(args)` prints its results and returns the exit status."""

    run: Callable[[argparse.Namespace], int]
    help: str
    dry: bool = True  # it has --dry: build every variant for sm_90, no GPU needed
    needs: tuple[str, ...] = ("torch",)  # what a live run needs besides a GPU: "torch", "cupy", "ncu"
    arguments: tuple = ()  # further options, as (flags, argparse keywords) pairs
    logged: bool = True  # False for a step another study runs under ncu: its output is that study's


def missing(needs: tuple[str, ...]) -> list[str]:
    """Which of a GPU and `needs` this machine lacks."""
    lacking = [] if helpers.gpu_available() else ["a GPU"]
    for need in needs:
        found = shutil.which(need) if need == "ncu" else importlib.util.find_spec(need)
        if not found:
            lacking.append("Nsight Compute (ncu)" if need == "ncu" else need)
    return lacking


class _Tee:
    """A text stream that writes to two."""

    def __init__(self, first, second):
        self.first, self.second = first, second

    def write(self, text):
        self.second.write(text)
        return self.first.write(text)

    def flush(self):
        self.first.flush()
        self.second.flush()


@contextlib.contextmanager
def logged(path: Path, command: str):
    """Copy stdout and stderr into `path`, under a header line saying where and how they were made."""
    now = datetime.datetime.now(datetime.timezone.utc)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as log:
        out, err = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Tee(out, log), _Tee(err, log)
        try:
            print(f"# {helpers.local_gpu_spec().name}, {now:%Y-%m-%d}, apache-tvm {tvm.__version__}; "
                  f"run {now:%H:%M} UTC: {command}", flush=True)
            yield
        finally:
            sys.stdout, sys.stderr = out, err
            print(f"(output written to {path})", file=sys.stderr)


def cli(script: str, doc: str, studies: dict[str, Study], argv=None) -> int:
    """Parse `STUDY [options]`, check that the machine can run it, run it (a live run logged)."""
    name = Path(script).name
    ap = argparse.ArgumentParser(prog=f"python gpu/experiments/{name}", description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="study", required=True, metavar="STUDY")
    for study_name, study in studies.items():
        p = sub.add_parser(study_name, help=study.help, description=study.help)
        if study.dry:
            p.add_argument("--dry", action="store_true", help="only build every variant for sm_90 (no GPU needed)")
        for flags, keywords in study.arguments:
            p.add_argument(*flags, **keywords)
    args = ap.parse_args(argv)
    study = studies[args.study]
    if getattr(args, "dry", False):
        return study.run(args)
    lacking = missing(study.needs)
    if lacking:
        print(f"{name} {args.study} needs {' and '.join(lacking)}, which this machine lacks"
              + (" (--dry only builds its variants)" if study.dry else ""), file=sys.stderr)
        return 2
    if not study.logged:
        return study.run(args)
    command = shlex.join(["python3", f"gpu/experiments/{name}", *(argv if argv is not None else sys.argv[1:])])
    log = Path(os.environ.get("OUT") or RESULTS) / f"{Path(name).stem}.{args.study}.txt"
    with logged(log, command):
        return study.run(args)


def one_of(allowed, described: str | None = None) -> Callable[[str], str]:
    """An argparse `type` that accepts the names in `allowed` (argparse's own `choices` refuses an
    empty list for nargs="*" on Python 3.11)."""
    def check(text: str) -> str:
        if text not in allowed:
            raise argparse.ArgumentTypeError(f"{text!r} is none of {described or ', '.join(allowed)}")
        return text
    return check


def error_line(err: Exception, width: int = 150) -> str:
    """The last line of an exception's message (TVM's carry a long backtrace before it)."""
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[-1][:width] if text else ''}"


def under_ncu(script: str, ncu_options: list[str], launch_args: list[str], timeout: float):
    """Run `python <script> <launch_args>` under Nsight Compute; the finished process, output captured."""
    command = [shutil.which("ncu"), *ncu_options, sys.executable, os.path.abspath(script), *launch_args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def ncu_raw(text: str) -> dict[str, tuple[str, str]]:
    """The metrics of the first kernel in ncu's `--csv --page raw` output: name -> (value, unit).
    Values keep ncu's spelling ("667,357"); `ncu_number` reads them."""
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    for i, header in enumerate(rows):
        if header[:2] == ["ID", "Process ID"] and i + 2 < len(rows):
            units, values = rows[i + 1], rows[i + 2]
            return {name: (values[j] if j < len(values) else "", units[j] if j < len(units) else "")
                    for j, name in enumerate(header)}
    return {}


def ncu_number(value: str) -> float | None:
    """A number as ncu's CSV writes it ("1,234.5"); None for "n/a" and the like."""
    try:
        return float(value.replace(",", ""))
    except ValueError:
        return None


# ------------------------------------------------------------------ Nsight Compute, kernels side by side


NCU_SECTIONS = ["SpeedOfLight", "ComputeWorkloadAnalysis", "InstructionStats", "MemoryWorkloadAnalysis",
                "MemoryWorkloadAnalysis_Tables", "Occupancy", "LaunchStats", "SchedulerStats", "WarpStateStats"]
# Clocks as the timing runs see them: ncu's default locks them to base, which slows every kernel alike.
NCU_OPTIONS = ["--launch-skip", "2", "--launch-count", "1", "--clock-control", "none", "--csv", "--page", "raw",
               "--print-units", "base", *[x for s in NCU_SECTIONS for x in ("--section", s)]]


def ncu_stalls(m: dict, top: int = 3) -> str:
    """The `top` reasons warps waited most, in cycles per issued instruction."""
    found = []
    for name, (value, _) in m.items():
        reason = name.removeprefix("smsp__average_warps_issue_stalled_").removesuffix("_per_issue_active.ratio")
        if reason != name and (x := ncu_number(value)):
            found.append((x, reason))
    return ", ".join(f"{r} {x:.1f}" for x, r in sorted(found, reverse=True)[:top]) or "-"


def ncu_first(m: dict, *names, scale=1.0, fmt="{:,.1f}") -> str:
    """The first of the metrics `names` that `m` has, scaled and formatted; "-" if none."""
    for name in names:
        if name in m and (x := ncu_number(m[name][0])) is not None:
            return fmt.format(x * scale)
    return "-"


_NCU_LAUNCH_ROWS = {  # row label: how to read it from one kernel's metrics
    "SM clock (GHz)": lambda m: ncu_first(m, "smsp__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg.per_second",
                                          "gpc__cycles_elapsed.avg.per_second", scale=1e-9, fmt="{:.2f}"),
    "grid x block": lambda m: f"{ncu_first(m, 'launch__grid_size', fmt='{:.0f}')} x "
                              f"{ncu_first(m, 'launch__block_size', fmt='{:.0f}')}",
    "registers / thread": lambda m: ncu_first(m, "launch__registers_per_thread", fmt="{:.0f}"),
    "shared memory / block (KB)": lambda m: ncu_first(m, "launch__shared_mem_per_block_allocated", scale=1 / 1024),
    "achieved occupancy (% of 64 warps)": lambda m: ncu_first(m, "sm__warps_active.avg.pct_of_peak_sustained_active"),
}
_NCU_ISSUE_ROWS = {
    "instructions executed (millions)": lambda m: ncu_first(m, "smsp__inst_executed.sum", "sm__inst_executed.sum",
                                                            scale=1e-6),
    "issue slots busy (%)": lambda m: ncu_first(m, "sm__inst_issued.avg.pct_of_peak_sustained_active",
                                                "smsp__issue_active.avg.pct_of_peak_sustained_active"),
    "warp cycles per issued instruction": lambda m: ncu_first(m, "smsp__average_warp_latency_per_inst_issued.ratio"),
    "top stalls (cycles per instruction)": ncu_stalls,
    "shared bank conflicts, loads": lambda m: ncu_first(m, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                                                        fmt="{:,.0f}"),
    "shared bank conflicts, stores": lambda m: ncu_first(m, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
                                                         fmt="{:,.0f}"),
    "L2 hit rate (%)": lambda m: ncu_first(m, "lts__t_sector_hit_rate.pct"),
    "DRAM throughput (% of peak)": lambda m: ncu_first(m, "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                                                       "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
}


def ncu_rows(flops: float, pipes: dict) -> dict:
    """The rows of a side-by-side profile (label: reader of one kernel's metrics): time, TFLOP/s
    for a problem of `flops`, launch and occupancy, then the `pipes` rows of the study, then
    instructions, stalls, bank conflicts and memory."""
    def tflops(m: dict) -> str:
        ns = ncu_number(m.get("gpu__time_duration.sum", ("", ""))[0])
        return f"{flops / ns / 1e3:.0f}" if ns else "-"

    return {"duration (us)": lambda m: ncu_first(m, "gpu__time_duration.sum", scale=1e-3), "TFLOP/s": tflops,
            **_NCU_LAUNCH_ROWS, **pipes, **_NCU_ISSUE_ROWS}


TENSOR_PIPE_ROWS = {  # a side-by-side profile's rows for tensor-core kernels (ncu_rows' `pipes`)
    "tensor pipe busy (% of cycles)": lambda m: ncu_first(m, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"),
    "HMMA (mma.sync, WMMA) issue rate (% of peak)":
        lambda m: ncu_first(m, "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active"),
    "HGMMA (wgmma) issue rate (% of peak)":
        lambda m: ncu_first(m, "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active"),
}


NCU_MENTIONED = ("bank_conflicts", "stalled", "hit_rate", "warps_active", "inst_executed", "inst_issued",
                 "issue_active", "cycles_elapsed.avg", "dram__throughput", "duration", "launch__")


def launch_checked(name: str, a: np.ndarray, b: np.ndarray, variant: Variant | None, c_dtype: str) -> int:
    """Launch one matmul C = a @ b 4 times (a study's `profile` has ncu profile the third) and
    check the first 256 rows of C against float64: `variant`'s kernel, which writes fp32 C, or,
    for None, torch's matmul (cuBLAS) writing C in `c_dtype`, at the inputs' own precision."""
    M, N = a.shape[0], b.shape[1]
    if variant is None:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False  # cuBLAS at the inputs' own precision
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()  # copies, no kernel launches
        tc = torch.empty(M, N, device="cuda", dtype=getattr(torch, c_dtype))
        for _ in range(4):
            torch.mm(ta, tb, out=tc) if tc.dtype == ta.dtype else torch.mm(ta, tb, out_dtype=tc.dtype, out=tc)
        torch.cuda.synchronize()
        c = tc[:256].float().cpu().numpy()
    else:
        _, ex = variant.build()
        dev = helpers.device()
        fn_args = [tvm.runtime.tensor(x, dev) for x in (a, b, np.zeros((M, N), "float32"))]
        for _ in range(4):
            ex.mod["main"](*fn_args)
        dev.sync()
        c = fn_args[2].numpy()[:256]
    ref = a[:256].astype("float64") @ b.astype("float64")
    print(f"{name}: relative error on the first 256 rows {helpers.relative_error(c, ref):.1e}")
    return 0


def profile_side_by_side(script: str, kernels: list[str], rows: dict, title: str, mentioned: tuple[str, ...],
                         launch_options: tuple[str, ...] = ()) -> int:
    """Run `python <script> launch KERNEL [launch_options]` under Nsight Compute for each kernel, at
    the clocks timing runs see; print the `rows` (label: reader of one kernel's metrics) side by side
    under `title`, then every metric whose name contains one of `mentioned`, per kernel."""
    found, status = {}, 0
    print(f"ncu {' '.join(NCU_OPTIONS)} python3 gpu/experiments/{Path(script).name} launch KERNEL "
          f"{' '.join(launch_options)}".rstrip(), flush=True)
    for kernel in kernels:
        try:
            proc = under_ncu(script, NCU_OPTIONS, ["launch", kernel, *launch_options], timeout=300)
        except Exception as err:  # noqa: BLE001 (a timeout, most likely)
            print(f"ncu {kernel}: {error_line(err)}", flush=True)
            status = 1
            continue
        checked = [line for line in proc.stdout.splitlines() if "relative error" in line]
        found[kernel] = metrics = ncu_raw(proc.stdout)
        name = metrics.get("Kernel Name", ("?", ""))[0]
        print(f"{checked[0] if checked else f'{kernel}: no check printed'}; kernel {name[:90]}", flush=True)
        if not metrics:
            tail = " | ".join(line.strip() for line in (proc.stdout + proc.stderr).strip().splitlines()[-4:])
            print(f"ncu {kernel}: no metrics (rc {proc.returncode}): {tail[:400]}", flush=True)
            status = 1
    if not found:
        return status or 1
    print(f"\n{helpers.local_gpu_spec().name}, {title}")
    table = [["", *found]] + [[label, *(read(m) if m else "-" for m in found.values())] for label, read in rows.items()]
    print(helpers.text_table(table))
    print("\nevery metric of " + ", ".join(mentioned) + ", per kernel:")
    for kernel, metrics in found.items():
        for name, (value, unit) in sorted(metrics.items()):
            if any(word in name for word in mentioned):
                print(f"  {kernel:7s} {name} = {value} {unit}".rstrip())
    return status


# ------------------------------------------------------------------ variants: build, check, time


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


@dataclasses.dataclass
class Measured:
    variant: Variant
    ms: float | None = None
    err: float | None = None
    note: str = ""

    @property
    def tflops(self) -> float:
        return 2.0 * np.prod(self.variant.shape) / self.ms / 1e9


def measure_matmuls(variants: list[Variant], check: Callable[[tuple], MatmulCheck], tol: float,
                    timing: Callable[[float], dict], deadline: float = float("inf")) -> list[Measured]:
    """Build each variant for this GPU, run it once against the reference and, if its relative
    error is within `tol`, time it with `helpers.time_function(**timing(first run's ms))`.
    Variants not started by `deadline` (time.time()) are skipped; failures are reported, not fatal."""
    results, data = [], None
    with_shape = several_shapes(variants)
    for v in variants:
        label = v.label(with_shape)
        if time.time() > deadline:
            results.append(Measured(v, note="skipped (time budget)"))
            continue
        t = time.time()
        try:
            _, ex = v.build()
            if data is None or data.shape != v.shape:
                data = None  # free one shape's arrays before making the next
                data = check(v.shape)
            first_ms, err = data.run(ex)
            if not err <= tol:
                results.append(Measured(v, err=err, note="WRONG, not timed"))
                print(f"{label}: WRONG, relative error {err:.2e}", flush=True)
                continue
            times = helpers.time_function(ex.mod, data.dev, data.args, **timing(first_ms))
            results.append(Measured(v, statistics.median(times), err))
            print(f"{label}: {results[-1].ms:.4f} ms, {results[-1].tflops:.2f} TFLOP/s, error {err:.1e} "
                  f"({time.time() - t:.1f} s)", flush=True)
        except Exception as err:  # noqa: BLE001 (report it, measure the rest)
            results.append(Measured(v, note=f"FAILED {error_line(err)}"))
            print(f"{label}: FAILED {error_line(err)}", flush=True)
    return results


def matmul_table(results: list[Measured], baseline_ms: dict) -> str:
    """One row per variant: time, TFLOP/s, relative error and % of the cuBLAS time of its shape."""
    with_shape = several_shapes([r.variant for r in results])
    rows = [["variant", *(["shape"] if with_shape else []), "ms", "TFLOP/s", "rel err", "% cuBLAS", "note"]]
    for r in results:
        shape = ["x".join(map(str, r.variant.shape))] if with_shape else []
        blas = baseline_ms.get(r.variant.shape)
        rows.append([r.variant.name, *shape, f"{r.ms:.4f}" if r.ms else "-", f"{r.tflops:.1f}" if r.ms else "-",
                     f"{r.err:.1e}" if r.err is not None else "-", f"{blas / r.ms:.1%}" if r.ms and blas else "-",
                     r.note])
    skipped = sum(r.note.startswith("skipped") for r in results)
    return helpers.text_table(rows) + (f"\n{skipped} variants skipped for time" if skipped else "")


def fp16_matmuls_beside_cublas(variants: list[Variant], n: int) -> int:
    """On this GPU: cuBLAS fp16 at n^3, then every variant checked against float64 (relative error
    within 1e-3) and timed, in one table with each as a percentage of that cuBLAS time."""
    blas = helpers.cublas_time(n, n, n, "float16")
    print(f"{helpers.local_gpu_spec().name}: cuBLAS float16 {blas:.4f} ms, {2.0 * n**3 / blas / 1e9:,.1f} TFLOP/s",
          flush=True)
    results = measure_matmuls(variants, lambda shape: MatmulCheck(shape, "float16", False, "float64"), 1e-3,
                              lambda _: dict(repeat=30))
    print(matmul_table(results, {(n, n, n): blas}))
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
    print(f"\n{title}, cuBLAS timed in {rounds} rounds alternating with each kernel's")
    print(helpers.text_table(rows))
    return 0


def print_ptxas(results: list[Measured], count: int, title: str = "the fastest variants") -> None:
    """What ptxas made of the `count` fastest variants (registers, shared memory, spills); needs nvcc."""
    fastest = sorted((r for r in results if r.ms), key=lambda r: r.ms)[:count]
    if not (fastest and helpers.nvcc_path()):
        return
    print(f"\nptxas (sm_90) of {title}:")
    for r in fastest:
        try:
            with tvm.transform.PassContext(config=r.variant.pass_config):
                for report in helpers.ptxas_report(r.variant.make(), helpers.listing_target()):
                    print(f"  {r.variant.name}: {report}")
        except Exception as err:  # noqa: BLE001
            print(f"  {r.variant.name}: ptxas failed: {error_line(err)}")


# ------------------------------------------------------------------ code read out of the notebooks

HEADER = "import numpy as np\nimport tvm\nfrom tvm import s_tir\nfrom tvm.script import tirx as T\nimport helpers\n\n"


def code_cells(notebook: str) -> list[str]:
    cells = json.loads((NOTEBOOKS / f"{notebook}.ipynb").read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def import_code(code: str, name: str):
    """`code` (after the imports notebooks use) as a module: TVMScript reads its functions' source
    back from a file, so the code is written to one first."""
    path = Path(tempfile.mkdtemp()) / f"{name}.py"
    path.write_text(HEADER + code + "\n")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def notebook_functions(notebook: str, names: set[str]):
    """A module holding the named top-level functions of the notebook's code cells, as it defines them."""
    chunks = []
    for src in code_cells(notebook):
        try:
            tree = ast.parse(src)
        except SyntaxError:  # a cell with IPython magic
            continue
        chunks += [ast.get_source_segment(src, node) for node in tree.body
                   if isinstance(node, ast.FunctionDef) and node.name in names]
    return import_code("\n\n\n".join(chunks), f"{notebook}_functions")


def notebook_code(notebook: str, *markers: str):
    """A module of the notebook's code cells that hold any of `markers` (e.g. "def hopper_matmul("),
    run together in notebook order: a kernel a notebook writes, for an experiment to measure."""
    found = [c for c in code_cells(notebook) if any(m in c for m in markers)]
    missing = [m for m in markers if not any(m in c for c in found)]
    if missing:
        raise LookupError(f"notebook {notebook} has no code cell holding {', '.join(map(repr, missing))}")
    return import_code("\n\n\n".join(found), f"{notebook}_code")


def notebook_template(name: str, edits: dict | None = None):
    """The schedule function `name` as notebook 06 defines it: the one code cell holding `def name(`,
    run with the cells defining the functions it calls (its steps sit in cells of their own).
    `edits` (old text: new text, each old text found exactly once) makes a variant."""
    cells = code_cells("06_metaschedule_tuning")
    found = [c for c in cells if f"def {name}(" in c]
    if len(found) != 1:
        raise LookupError(f"notebook 06 has {len(found)} code cells defining {name}: expected one")
    src = found[0]
    for old, new in (edits or {}).items():
        if src.count(old) != 1:
            raise ValueError(f"{name} in notebook 06 holds {old!r} {src.count(old)} times: expected once")
        src = src.replace(old, new)
    return getattr(import_code("\n\n\n".join(_cells_called_by(src, cells) + [src]), f"notebook06_{name}"), name)


def _cells_called_by(src: str, cells: list[str]) -> list[str]:
    """The cells (in notebook order) that define a function `src` calls, and those their functions call."""
    def defined(cell):
        try:
            return {n.name for n in ast.parse(cell).body if isinstance(n, ast.FunctionDef)}
        except SyntaxError:  # a cell with IPython magic
            return set()

    def called(code):
        return {n.func.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}

    wanted, todo, chosen = set(), called(src) - defined(src), []
    while todo:
        wanted |= todo
        new = [c for c in cells if c != src and c not in chosen and defined(c) & todo]
        chosen += new
        todo = set().union(*(called(c) for c in new)) - wanted if new else set()
    return [c for c in cells if c in chosen]


# ------------------------------------------------------------------ schedule pieces of several topics


def copy_module(n: int) -> tvm.IRModule:
    """B[i] = A[i] over n floats: the kernel that measures the bandwidth ceiling (notebooks 00-02)."""

    @I.ir_module
    class Copy:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((n,), "float32"), B: T.Buffer((n,), "float32")):
            T.func_attr({"tirx.noalias": True})
            for i in range(n):
                with T.sblock("B"):
                    vi = T.axis.spatial(n, i)
                    B[vi] = A[vi]

    return Copy


def blockize_fragments(sch, block, rows: int, cols: int, depth: int):
    """Split the matmul `block`'s i, j and k loops into tiles of one tensor-core operation (rows x
    cols x depth) and make each tile a block of its own. Returns that block and the outer i, j, k."""
    i, j, k = sch.get_loops(block)
    i, i_tc = sch.split(i, [None, rows])
    j, j_tc = sch.split(j, [None, cols])
    k, k_tc = sch.split(k, [None, depth])
    sch.reorder(i, j, k, i_tc, j_tc, k_tc)
    return sch.blockize(i_tc), i, j, k


def tile_copy(sch, block, rows: int, cols: int):
    """Split the last two loops of a fragment copy into rows x cols tiles, tiles outermost; returns
    the two tile loops and the loop holding one tile (what a load or store intrinsic replaces)."""
    x, y = sch.get_loops(block)[-2:]
    x0, x1 = sch.split(x, [None, rows])
    y0, y1 = sch.split(y, [None, cols])
    sch.reorder(x0, y0, x1, y1)
    return x0, y0, x1
