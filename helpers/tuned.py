"""Reading what a MetaSchedule search left behind: its tuning databases, replayed without a GPU.

    best = helpers.replay(helpers.database_dir("matmul_fp32_4096"))   # needs no GPU
    print(best.sch.trace)
    top5 = helpers.top_kernels(helpers.open_database(path), func, k=5)

Tuning needs a GPU and minutes to hours; reading its results needs neither, so the notebooks
commit the databases tuned on a GPU (notebooks/results/<gpu>/tuning/<name>, see `database_dir`)
and replay them everywhere. A database is a directory holding database_workload.json (each
workload's IRModule) and database_tuning_record.json (one record per measured candidate: the
index of its workload, its trace, its measured latencies). `replay` applies the best record's
trace to its workload: the tuned schedule, ready to print, build or time, in seconds.

This module holds the reading side: the database files, opening them, picking the best records
(`top_kernels`, `best_record`, `replay`) as `TunedKernel`s, and the workload module a database
is keyed by (`_as_module`). `helpers.tuning` runs the search that writes the databases and
uses these pieces to read them back.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from pathlib import Path

import tvm
import tvm_ffi
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.tune_context import _normalize_mod

from . import records
from .kernels import check_number

#: The two files of a MetaSchedule JSON database, in its directory.
WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"


# ---------------------------------------------------------------- the workload a database is keyed by


def _as_module(func) -> tvm.IRModule:
    """The IRModule MetaSchedule stores as the workload (a PrimFunc becomes `main`)."""
    if isinstance(func, tvm.s_tir.Schedule):
        raise TypeError("pass the PrimFunc (or IRModule) to tune, not a Schedule: MetaSchedule writes the schedule")
    if isinstance(func, tvm.tirx.PrimFunc):
        return _normalize_mod(func)
    if isinstance(func, tvm.IRModule):
        names = [gv.name_hint for gv in func.get_global_vars()]
        if names != ["main"]:
            raise ValueError(f"expected an IRModule with one function named 'main', got {names}")
        return func
    raise TypeError(f"expected a tvm.tirx.PrimFunc or IRModule, got {type(func).__name__}")


def _flop_count(mod: tvm.IRModule) -> float | None:
    """The floating-point operations of one run of `mod` (TVM's estimate); None when TVM has none."""
    try:
        from tvm.s_tir.analysis import estimate_tir_flops

        return float(estimate_tir_flops(mod))
    except Exception:
        return None


# ---------------------------------------------------------------- databases and replay


@dataclasses.dataclass
class TunedKernel:
    """The best record of a database: its schedule (trace applied to the workload) and the
    latency MetaSchedule measured for it while tuning."""

    sch: tvm.s_tir.Schedule
    tuning_ms: float
    target: str
    records: int  # valid records of this workload in the database
    source: str  # the database directory's name
    flop: float | None
    run_secs: list = dataclasses.field(default_factory=list)  # as stored: identifies the record

    @property
    def trace(self):
        return self.sch.trace

    @property
    def tuning_tflops(self) -> float | None:
        return self.flop / (self.tuning_ms * 1e-3) / 1e12 if self.flop else None

    def describe(self) -> str:
        rate = f", {self.tuning_tflops:,.2f} TFLOP/s" if self.tuning_tflops else ""
        return f"{self.tuning_ms:.4f} ms{rate} when measured during tuning (best of {self.records} records)"


def database_dir(name: str, gpu: str | None = None, root: Path | None = None) -> Path:
    """Where a committed tuning database lives: notebooks/results/<gpu-slug>/tuning/<name>.
    `gpu` is a slug or a GPU name (default: the recorded GPU)."""
    slug = records.gpu_slug(gpu) if gpu else records.recorded_gpu()
    return Path(root or records.RESULTS_DIR) / slug / "tuning" / name


def committed_database(name: str, gpu: str | None = None) -> Path | None:
    """The committed database `name` tuned on `gpu` (a live session's own GPU), else the one tuned
    on the recorded GPU; None when there is neither."""
    for where in ([gpu] if gpu else []) + [None]:
        path = database_dir(name, where)
        if path.is_dir():
            return path
    return None


def open_database(path) -> ms.database.JSONDatabase:
    """Open a committed JSON database for reading; a clear error when it is not there."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no tuning database at {path}: the directory does not exist "
                                "(tune first, or check the GPU folder and the name)")
    if not path.is_dir():
        raise NotADirectoryError(f"{path} is a file; a tuning database is a directory holding "
                                 f"{WORKLOAD_FILE} and {RECORD_FILE}")
    missing = [f for f in (WORKLOAD_FILE, RECORD_FILE) if not (path / f).is_file()]
    if missing:
        raise FileNotFoundError(f"the directory {path} lacks {' and '.join(missing)}: it is not a MetaSchedule "
                                "JSON database")
    if '"Tensorize"' in (path / RECORD_FILE).read_text():
        # traces that tensorize name tensor intrinsics (TVM's and the course's), registered first
        from . import intrinsics  # noqa: F401
    return json_database(path, create=False)


def json_database(path, create: bool = True) -> ms.database.JSONDatabase:
    """The MetaSchedule JSON database in directory `path`; `create`: start empty files if absent
    (what a search writing into a work directory wants; reading a committed one uses `open_database`)."""
    return ms.database.JSONDatabase(path_workload=str(Path(path) / WORKLOAD_FILE),
                                    path_tuning_record=str(Path(path) / RECORD_FILE), allow_missing=create)


def _median_sec(rec) -> float:
    """A record's median measured latency in seconds; infinity for a candidate that failed."""
    secs = [float(s) for s in rec.run_secs or []]
    return statistics.median(secs) if secs else math.inf


def _valid_records(database, func, where: str) -> list:
    recs = [r for r in database.get_all_tuning_records() if _median_sec(r) < 1e9]
    if func is not None:
        mod = _as_module(func)
        recs = [r for r in recs if tvm_ffi.structural_equal(r.workload.mod, mod)]
        if not recs:
            raise LookupError(
                f"{where} holds no valid record for this workload: a different shape, dtype or attributes "
                "(a PrimFunc without T.func_attr({'tirx.noalias': True}) is a different workload)")
    elif not recs:
        raise LookupError(f"{where} holds no valid (measured, error-free) tuning record")
    else:
        hashes = {tvm_ffi.structural_hash(r.workload.mod) for r in recs}
        if len(hashes) > 1:
            raise ValueError(f"{where} holds {len(hashes)} workloads: pass the PrimFunc to choose one")
    return recs


def top_kernels(database, func=None, k: int = 1, source="") -> list[TunedKernel]:
    """The `k` best valid records (lowest median latency while tuning) of `database`, for
    `func`'s workload (default: the database's only workload), as TunedKernels."""
    check_number("k", k)
    where = Path(source).name if source else "the database"
    recs = sorted(_valid_records(database, func, where), key=_median_sec)
    out = []
    for rec in recs[:k]:
        # a Schedule may rewrite the statements of a module it is given in place: work on a copy,
        # never on the database's own workload
        mod = tvm.ir.load_json(tvm.ir.save_json(rec.workload.mod))
        sch = tvm.s_tir.Schedule(mod)
        rec.trace.apply_to_schedule(sch, remove_postproc=False)
        out.append(TunedKernel(sch=sch, tuning_ms=_median_sec(rec) * 1e3, target=str(rec.target),
                               records=len(recs), source=where, flop=_flop_count(mod),
                               run_secs=[float(x) for x in rec.run_secs]))
    return out


def best_record(database, func=None, source="") -> TunedKernel:
    """The best valid record of `database` (see `top_kernels`)."""
    return top_kernels(database, func, 1, source)[0]


def replay(path, func=None) -> TunedKernel:
    """The best tuned kernel of the committed database in directory `path` (no GPU needed):
    `.sch` is the schedule (print `.sch.trace`, `.sch.mod.script()`, or build it)."""
    return best_record(open_database(path), func, source=path)
