"""MetaSchedule with a budget, a quiet log and a progress bar; replay from a committed database.

    run = helpers.tune(func, "tuning/fp32", trials=64, minutes=2.5)   # needs a GPU
    best = helpers.replay("results/<gpu>/tuning/matmul_fp32_4096")     # needs no GPU
    print(best.sch.trace)

`tune` measures every candidate kernel on the GPU, so it refuses to start without one. It
stops after `trials` measured candidates or, when `minutes` is given, before starting a round
of candidates that would not finish in time. MetaSchedule's own log (every candidate, every
error, the design spaces) goes to a file, not to the notebook; the notebook shows one progress
bar. A work directory that already holds a database is resumed: its records seed the search
and the cost model.

`replay` reads a MetaSchedule JSON database (database_workload.json and
database_tuning_record.json) and applies the best record's trace to its workload: the tuned
schedule, ready to print, build or time, in seconds and without a GPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import os
import statistics
import sys
import time
from pathlib import Path

import tvm
import tvm_ffi
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule import _ffi_api
from tvm.s_tir.meta_schedule.tune_context import _normalize_mod
from tvm.script import tirx as T

from . import env, records

#: The named design spaces `tune` knows (a `space` may also be a schedule function: see
#: `make_space`). "cuda": MetaSchedule's default rules for CUDA cores.
#: "cuda-tensorcore": its default tensor-core rules (for a float16 matmul the WMMA rule applies
#: first, so these sketches use WMMA). "cuda-mma": only the tensor-core rule built on
#: mma.sync + ldmatrix with a cp.async software pipeline. "cuda-tensorcore-all": the union
#: of the two, so the search (and its cost model) chooses. "llvm": CPUs (the unit tests).
SPACES = ("cuda", "cuda-tensorcore", "cuda-mma", "cuda-tensorcore-all", "llvm")

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"

_MS_LOGGER = "tvm.s_tir.meta_schedule"


# ---------------------------------------------------------------- the workload


def matmul_workload(M: int, N: int, K: int, dtype: str = "float32", acc_dtype: str | None = None,
                    transpose_b: bool = False) -> tvm.tirx.PrimFunc:
    """C[M, N] = A[M, K] @ B[K, N] as a PrimFunc to tune: inputs in `dtype`, sums and output in
    `acc_dtype` (default: `dtype`; float16 inputs with float32 sums is the tensor-core case).
    With `transpose_b` B is stored N x K (C = A @ B.T), as in notebook 05.

    It carries the `tirx.noalias` attribute, so the database written by tuning it answers
    queries for it (a PrimFunc without the attribute is a different workload)."""
    for name, v in (("M", M), ("N", N), ("K", K)):
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    acc = acc_dtype or dtype
    for d in {dtype, acc}:
        if d not in ("float16", "float32", "float64"):
            raise ValueError(f"dtype {d!r} is not supported here: use float16, float32 or float64")
    b_shape = (N, K) if transpose_b else (K, N)

    def b_at(B, vj, vk):
        return B[vj, vk] if transpose_b else B[vk, vj]

    # Two bodies, not one with casts that happen to be no-ops: a cast is part of the workload's
    # structure, so an fp32 workload with casts would match no committed fp32 database.
    if acc == dtype:

        @T.prim_func(s_tir=True)
        def matmul(A: T.Buffer((M, K), dtype), B: T.Buffer(b_shape, dtype), C: T.Buffer((M, N), dtype)):
            T.func_attr({"tirx.noalias": True})
            for i, j, k in T.grid(M, N, K):
                with T.sblock("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    with T.init():
                        C[vi, vj] = T.cast(0, dtype)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * b_at(B, vj, vk)

    else:

        @T.prim_func(s_tir=True)
        def matmul(A: T.Buffer((M, K), dtype), B: T.Buffer(b_shape, dtype), C: T.Buffer((M, N), acc)):
            T.func_attr({"tirx.noalias": True})
            for i, j, k in T.grid(M, N, K):
                with T.sblock("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    with T.init():
                        C[vi, vj] = T.cast(0, acc)
                    C[vi, vj] = C[vi, vj] + T.cast(A[vi, vk], acc) * T.cast(b_at(B, vj, vk), acc)

    return matmul


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


# ---------------------------------------------------------------- the search space


def _check_space(space) -> None:
    if callable(space):
        return
    if not isinstance(space, str) or space not in SPACES:
        raise ValueError(f"unknown design space {space!r}: choose one of {', '.join(SPACES)}, "
                         "or pass a schedule function (a template)")


def _is_cuda_space(space) -> bool:
    """Whether `space` only makes sense for a CUDA target (a template may target anything)."""
    return isinstance(space, str) and space.startswith("cuda")


def space_name(space) -> str:
    """How logs and messages name a design space: its name, or the template function's name."""
    return space if isinstance(space, str) else f"template {getattr(space, '__name__', type(space).__name__)}"


def make_space(space="cuda"):
    """The space generator for `space`: one of SPACES (MetaSchedule's schedule rules,
    postprocessors and mutation probabilities), or a **template**: a function that schedules
    the `Schedule` it is given, with `sch.sample_perfect_tile` / `sch.sample_categorical`
    where a hand-written schedule would have a number. No schedule rules run on a template;
    the target's default postprocessors (e.g. VerifyGPUCode) check each sample, and the
    target's default mutators (e.g. MutateTileSize) vary its decisions."""
    _check_space(space)
    if callable(space):
        return ms.space_generator.ScheduleFn(space, sch_rules=[], postprocs="from-target",
                                             mutator_probs="from-target")
    if space in ("cuda", "llvm"):
        return ms.space_generator.PostOrderApply(sch_rules=space, postprocs=space, mutator_probs=space)
    import tvm.s_tir.tensor_intrin.cuda  # noqa: F401  (registers the WMMA / mma intrinsics)

    tc = "cuda-tensorcore"
    if space == tc:
        return ms.space_generator.PostOrderApply(sch_rules=tc, postprocs=tc, mutator_probs=tc)
    rules = list(ms.ScheduleRule.create(tc))
    # [ApplyCustomRule, MultiLevelTilingTensorCore(WMMA), MultiLevelTilingTensorCore(mma), ...CUDA rules]
    mma = ms.space_generator.PostOrderApply(sch_rules=[rules[0]] + rules[2:], postprocs=tc, mutator_probs=tc)
    if space == "cuda-mma":
        return mma
    wmma = ms.space_generator.PostOrderApply(sch_rules=tc, postprocs=tc, mutator_probs=tc)
    return ms.space_generator.SpaceGeneratorUnion([wmma, mma], sch_rules=[], postprocs=tc, mutator_probs=tc)


def _tuning_target(target, space) -> tvm.target.Target:
    if target is None:
        if space == "llvm":
            return tvm.target.Target({"kind": "llvm", "num-cores": 1})
        if env.gpu_available():
            return env.make_target()
        return tvm.target.Target("nvidia/nvidia-h100")
    return target if isinstance(target, tvm.target.Target) else env.make_target(target)


#: The target the sketches and samples shown in the notebooks are made for when none is given: fixed
#: (an H100's limits), so the listings are the same on every machine, with or without a GPU.
LISTING_TARGET = "nvidia/nvidia-h100"


def _listing_target(target, space):
    if target is None:
        target = {"kind": "llvm", "num-cores": 1} if space == "llvm" else LISTING_TARGET
    return _tuning_target(target, space)


def design_spaces(func, space="cuda", target=None, seed: int = 0) -> list[tvm.s_tir.Schedule]:
    """The sketches MetaSchedule generates for `func`: each schedule rule applied in post-order
    to every block (or the template `space` applied once), with its tile sizes and other
    decisions left to sampling. Needs no GPU (the target defaults to LISTING_TARGET, an H100's
    limits)."""
    mod = _as_module(func)
    ctx = ms.TuneContext(mod, target=_listing_target(target, space), space_generator=make_space(space),
                         task_name="main", rand_state=seed, num_threads=1)
    return list(ctx.generate_design_space())


@dataclasses.dataclass
class Samples:
    """Random fillings of one sketch: the post-processed schedules that passed, and how many
    each postprocessor rejected."""

    valid: list
    rejected: dict
    tries: int

    def __str__(self) -> str:
        why = ", ".join(f"{n} by {k}" for k, n in sorted(self.rejected.items())) or "none"
        return f"{len(self.valid)} of {self.tries} random samples passed the postprocessors (rejected: {why})"


def sample_candidates(func, sketch, *, space="cuda", tries: int = 20, seed: int = 0, target=None) -> Samples:
    """Fill the decisions of `sketch` (one of `design_spaces`) at random `tries` times and run
    the postprocessors on each, as the search does for its initial population. No GPU needed."""
    if isinstance(tries, bool) or not isinstance(tries, int) or tries <= 0:
        raise ValueError(f"tries must be a positive integer, got {tries!r}")
    mod = _as_module(func)
    ctx = ms.TuneContext(mod, target=_listing_target(target, space), space_generator=make_space(space),
                         task_name="main", rand_state=seed, num_threads=1)
    unsampled = tvm.s_tir.schedule.Trace(sketch.trace.insts, {})
    valid, rejected = [], {}
    for i in range(tries):
        sch = tvm.s_tir.Schedule(tvm.ir.load_json(tvm.ir.save_json(mod)), seed=seed + i + 1)
        unsampled.apply_to_schedule(sch, remove_postproc=True)
        failed = next((p for p in ctx.space_generator.postprocs if not p.apply(sch)), None)
        if failed is None:
            valid.append(sch)
        else:
            name = type(failed).__name__
            rejected[name] = rejected.get(name, 0) + 1
    return Samples(valid, rejected, tries)


def candidate_features(sch, target=None):
    """What the cost model sees of one candidate: MetaSchedule's per-store features (one row of
    numbers per buffer store: loads, arithmetic, memory footprint, loop and thread structure)."""
    ctx = ms.TuneContext(sch.mod, target=_listing_target(target, "cuda"), num_threads=1)
    cand = ms.MeasureCandidate(sch, ms.arg_info.ArgInfo.from_entry_func(sch.mod, remove_preproc=True))
    return ms.feature_extractor.PerStoreFeature().extract_from(ctx, [cand])[0].numpy()


# ---------------------------------------------------------------- budget and progress


def _check_budget(trials, trials_per_iter, minutes) -> None:
    if isinstance(trials, bool) or not isinstance(trials, int) or trials <= 0:
        raise ValueError(f"trials must be a positive integer (the number of candidate kernels to measure), got {trials!r}")
    if isinstance(trials_per_iter, bool) or not isinstance(trials_per_iter, int) or trials_per_iter <= 0:
        raise ValueError(f"trials_per_iter must be a positive integer (candidates measured per round), got {trials_per_iter!r}")
    if minutes is not None:
        if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not math.isfinite(minutes) or minutes <= 0:
            raise ValueError(f"minutes must be a positive number (the time limit of the search) or None, got {minutes!r}")


class _Progress:
    """A progress bar over measured candidates: tqdm when installed, else one plain line per round."""

    def __init__(self, total: int, stream, enabled: bool, desc: str):
        self.total, self.stream, self.enabled, self.desc = total, stream, enabled, desc
        self.done = 0
        self.bar = None
        if enabled:
            try:
                from tqdm.std import tqdm

                self.bar = tqdm(total=total, desc=desc, unit="trial", file=stream, ncols=100,
                                mininterval=0, bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]")
            except ImportError:
                self.bar = None

    def update(self, n: int, postfix: str) -> None:
        self.done += n
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(postfix, refresh=False)
            self.bar.update(n)
        else:
            print(f"{self.desc}: {self.done}/{self.total} trials, {postfix}", file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@derived_object
class _ProgressCallback(ms.measure_callback.PyMeasureCallback):
    """After each round of measurements: count them, keep the best, move the progress bar."""

    def __init__(self, state: "_State"):
        self.state = state

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results) -> None:
        st = self.state
        for b, r in zip(builder_results, runner_results):
            if b.error_msg is not None:
                st.build_errors += 1
            elif r.error_msg is not None or not r.run_secs:
                st.run_errors += 1
            else:
                sec = statistics.median(float(x) for x in r.run_secs)
                if sec < st.best_sec:
                    st.best_sec = sec
        st.measured += len(runner_results)
        rate = f"best {st.flop / st.best_sec / 1e12:,.2f} TFLOP/s" if st.flop and math.isfinite(st.best_sec) else (
            f"best {st.best_sec * 1e3:.3f} ms" if math.isfinite(st.best_sec) else "no valid kernel yet")
        errors = st.build_errors + st.run_errors
        st.progress.update(len(runner_results), rate + (f", {errors} failed" if errors else ""))


@derived_object
class _TimedSearch(ms.search_strategy.PySearchStrategy):
    """MetaSchedule's evolutionary search with a deadline: before each round it estimates the
    round's duration from the previous ones and stops when the round would overrun."""

    def __init__(self, inner, state: "_State"):
        self.inner = inner
        self.state = state

    def _initialize_with_tune_context(self, context) -> None:
        _ffi_api.SearchStrategyInitializeWithTuneContext(self.inner, context)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        self.inner.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database, cost_model)

    def post_tuning(self) -> None:
        self.inner.post_tuning()

    def generate_measure_candidates(self):
        st = self.state
        now = time.monotonic()
        if st.round_start is not None:
            st.round_seconds.append(now - st.round_start)
        if st.deadline is not None and st.round_seconds:
            estimate = max(st.round_seconds[-3:])
            if now + estimate > st.deadline:
                st.stopped_for_time = True
                return None
        st.round_start = now
        return self.inner.generate_measure_candidates()

    def notify_runner_results(self, measure_candidates, results) -> None:
        self.inner.notify_runner_results(measure_candidates, results)

    def clone(self):
        return _TimedSearch(self.inner.clone(), self.state)


@dataclasses.dataclass
class _State:
    flop: float
    progress: _Progress
    deadline: float | None
    measured: int = 0
    build_errors: int = 0
    run_errors: int = 0
    best_sec: float = math.inf
    round_start: float | None = None
    round_seconds: list = dataclasses.field(default_factory=list)
    stopped_for_time: bool = False


# ---------------------------------------------------------------- quiet logging


def _log_func(logger: logging.Logger):
    """MetaSchedule's C++ side logs through this; level -1 asks to clear the notebook's output
    (which would wipe the progress bar), so it is ignored here."""
    levels = {logging.DEBUG: logger.debug, logging.INFO: logger.info, logging.WARNING: logger.warning,
              logging.ERROR: logger.error}

    def log(level: int, filename: str, lineno: int, msg: str) -> None:
        if level >= 0:
            levels.get(level, logger.info)(f"[{os.path.basename(filename)}:{lineno}] {msg}")

    return log


def _in_notebook() -> bool:
    return type(sys.stdout).__module__.startswith("ipykernel")


_IPYTHON_CHECK = "s_tir.meta_schedule.using_ipython"
_ipython_original = None  # MetaSchedule's own check, kept when ours replaces it
_quiet_depth = 0


def _using_ipython() -> bool:
    return False if _quiet_depth else bool(_ipython_original and _ipython_original())


def _install_ipython_check() -> None:
    """In a notebook MetaSchedule displays its task table (a pandas DataFrame) after every round,
    beside the progress bar. Its C++ side asks the global function `_IPYTHON_CHECK` whether it
    runs in IPython: while `_quiet` is active the answer is no, so the table goes to the log
    file; otherwise MetaSchedule's own answer is passed on."""
    global _ipython_original
    if _ipython_original is None:
        _ipython_original = tvm_ffi.get_global_func(_IPYTHON_CHECK, allow_missing=True) or (lambda: False)
        tvm_ffi.register_global_func(_IPYTHON_CHECK, _using_ipython, override=True)


@contextlib.contextmanager
def _quiet(log_file: Path, redirect_fds: bool):
    """Send MetaSchedule's Python loggers, and (optionally) everything C++ code and the worker
    processes write to file descriptors 1 and 2, to `log_file`; give back a stream for the
    progress bar that still reaches the screen."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(log_file, mode="a")
    handler.setFormatter(logging.Formatter("%(asctime)s [%(levelname)s] %(message)s", "%Y-%m-%d %H:%M:%S"))
    ms_logger = logging.getLogger(_MS_LOGGER)
    saved = (ms_logger.level, ms_logger.propagate, list(ms_logger.handlers))
    for h in saved[2]:
        ms_logger.removeHandler(h)
    ms_logger.addHandler(handler)
    ms_logger.setLevel(logging.DEBUG)
    ms_logger.propagate = False
    global _quiet_depth
    _install_ipython_check()
    _quiet_depth += 1
    saved_fds = []
    screen = sys.stdout
    try:
        if redirect_fds:
            for s in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    s.flush()
            if not _in_notebook():
                # a script: the progress bar keeps a copy of the terminal
                screen = os.fdopen(os.dup(1), "w", buffering=1)
            target = os.open(log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            for fd in (1, 2):
                saved_fds.append((fd, os.dup(fd)))
                os.dup2(target, fd)
            os.close(target)
        yield screen
    finally:
        _quiet_depth -= 1
        for fd, copy in saved_fds:
            os.dup2(copy, fd)
            os.close(copy)
        if screen is not sys.stdout:
            screen.close()
        ms_logger.removeHandler(handler)
        handler.close()
        ms_logger.setLevel(saved[0])
        ms_logger.propagate = saved[1]
        for h in saved[2]:
            ms_logger.addHandler(h)


# ---------------------------------------------------------------- tuning


@dataclasses.dataclass
class TuningRun:
    """What one call of `tune` did; `best` is the best kernel in the whole database."""

    work_dir: Path
    log_file: Path
    trials: int  # candidates measured in this call
    failed: int  # of which failed to build or run
    seconds: float
    stopped_for_time: bool
    best: "TunedKernel | None"

    def __str__(self) -> str:
        why = "time limit reached" if self.stopped_for_time else "trial budget used"
        head = f"measured {self.trials} candidates in {self.seconds:.0f} s ({self.failed} failed; {why})"
        if self.best is None:
            return head + "; no valid kernel found"
        return head + f"; best in the database: {self.best.describe()}"


def tune(func, work_dir, *, trials: int, minutes: float | None = None, space="cuda", target=None,
         trials_per_iter: int = 32, seed: int | None = None, log_file=None, progress: bool = True,
         quiet_fds: bool = True, builder="local", runner="local", num_tuning_cores="physical",
         warm_start: bool = True, build_timeout: float = 120.0, pass_config: dict | None = None) -> TuningRun:
    """Tune `func` (a PrimFunc) with MetaSchedule; the database goes to `work_dir`.

    trials: how many candidate kernels to measure at most; minutes: an optional time limit;
    space: one of SPACES or a template (see `make_space`); trials_per_iter: the
    candidates measured per round of evolutionary search. The log goes to `log_file` (default
    `work_dir/logs/tuning.log`). A database already in `work_dir` is resumed. pass_config:
    options every candidate is compiled with, e.g. {"tirx.use_async_copy": True} for a
    template whose software pipeline copies with cp.async (notebook 05).
    """
    _check_budget(trials, trials_per_iter, minutes)
    _check_space(space)
    _check_pass_config(pass_config)
    mod = _as_module(func)
    tgt = _tuning_target(target, space)
    if tgt.kind.name == "cuda" and runner == "local":
        if not env.gpu_available():
            raise RuntimeError("tuning measures every candidate kernel on a GPU, and no CUDA GPU is visible: "
                               "replay a committed database instead (helpers.replay)")
        if _is_cuda_space(space) and space != "cuda":
            env.require_tensor_cores(env.local_gpu_spec())
    if _is_cuda_space(space) and tgt.kind.name != "cuda":
        raise ValueError(f"the design space {space!r} needs a CUDA target, got {tgt.kind.name!r}")
    work_dir = Path(work_dir)
    if work_dir.exists() and not work_dir.is_dir():
        raise NotADirectoryError(f"work_dir {work_dir} is a file, not a directory")
    work_dir.mkdir(parents=True, exist_ok=True)
    log_file = Path(log_file) if log_file is not None else work_dir / "logs" / "tuning.log"

    database = ms.database.JSONDatabase(path_workload=str(work_dir / WORKLOAD_FILE),
                                        path_tuning_record=str(work_dir / RECORD_FILE), allow_missing=True)
    start = time.monotonic()
    flop = _flop_count(mod)
    bar = None
    with _quiet(log_file, quiet_fds) as screen:
        bar = _Progress(trials, screen, progress, desc="tuning")
        state = _State(flop=flop, progress=bar, deadline=start + 60 * minutes if minutes else None)
        logger = logging.getLogger(f"{_MS_LOGGER}.helpers_task")
        ctx = ms.TuneContext(mod, target=tgt, space_generator=make_space(space),
                             search_strategy=_TimedSearch(ms.search_strategy.EvolutionarySearch(), state),
                             task_name="main", rand_state=-1 if seed is None else seed,
                             num_threads=num_tuning_cores, logger=logger)
        cost_model = ms.cost_model.XGBModel(num_tuning_cores=ctx.num_threads, tree_method="auto")
        if warm_start:
            _warm_start(cost_model, ctx, database, mod)
        if builder == "local":
            # each round starts fresh worker processes that import TVM's tensor intrinsics
            # (seconds each): the default 30 s timeout is too tight on a busy machine
            builder = ms.builder.LocalBuilder(timeout_sec=build_timeout, f_build=functools.partial(
                _build_with, dict(pass_config)) if pass_config else None)
        scheduler = _ffi_api.TaskSchedulerGradientBased(_log_func(logging.getLogger(f"{_MS_LOGGER}.helpers_scheduler")),
                                                        0.2, 3, -1)
        callbacks = list(ms.MeasureCallback.create("default")) + [_ProgressCallback(state)]
        try:
            ms.tune_tasks(tasks=[ctx], task_weights=[1.0], work_dir=str(work_dir), max_trials_global=trials,
                          num_trials_per_iter=min(trials_per_iter, trials), builder=builder, runner=runner,
                          database=database, cost_model=cost_model, measure_callbacks=callbacks,
                          task_scheduler=scheduler)
        finally:
            bar.close()
    best = None
    with contextlib.suppress(LookupError):
        best = best_record(database, mod, source=work_dir)
    return TuningRun(work_dir=work_dir, log_file=log_file, trials=state.measured,
                     failed=state.build_errors + state.run_errors, seconds=time.monotonic() - start,
                     stopped_for_time=state.stopped_for_time, best=best)


def _check_pass_config(pass_config) -> None:
    if pass_config is None:
        return
    if not isinstance(pass_config, dict):
        raise TypeError(f"pass_config must be a dict of compiler options, got {type(pass_config).__name__}")
    try:
        tvm.transform.PassContext(config=pass_config)
    except Exception as err:  # an unknown option: TVM names it
        why = str(err).strip().splitlines()[-1].split(" candidates are")[0]
        raise ValueError(f"pass_config is not accepted by TVM: {why} "
                         "(tvm.transform.PassContext.list_configs() lists the options)") from None


def _build_with(pass_config: dict, mod, target, params):
    """MetaSchedule's default build of one candidate, under `pass_config` (runs in a builder
    worker process, which imports this module to find it)."""
    from tvm.s_tir.meta_schedule.builder.local_builder import default_build

    with tvm.transform.PassContext(config=pass_config):
        return default_build(mod, target, params)


def _warm_start(cost_model, ctx, database, mod, limit: int = 200) -> int:
    """Train the cost model on records already in the database (when resuming): up to `limit`
    of them, spread from the fastest to the slowest so the model sees good and bad programs."""
    recs = [r for r in database.get_all_tuning_records()
            if _median_sec(r) < 1e9 and tvm_ffi.structural_equal(r.workload.mod, mod)]
    recs.sort(key=_median_sec)
    if len(recs) > limit:
        step = len(recs) / limit
        recs = [recs[int(i * step)] for i in range(limit)]
    cands, results = [], []
    for r in recs:
        try:
            cands.append(r.as_measure_candidate())
        except Exception:  # a trace that no longer applies (TVM changed): skip it
            continue
        results.append(ms.runner.RunnerResult(run_secs=r.run_secs, error_msg=None))
    if cands:
        cost_model.update(ctx, cands, results)
    return len(cands)


def _flop_count(mod: tvm.IRModule) -> float | None:
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
        # traces that tensorize name TVM's tensor intrinsics, which must be registered first
        import tvm.s_tir.tensor_intrin.cuda  # noqa: F401
    return ms.database.JSONDatabase(path_workload=str(path / WORKLOAD_FILE),
                                    path_tuning_record=str(path / RECORD_FILE), allow_missing=False)


def _median_sec(rec) -> float:
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
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise ValueError(f"k must be a positive integer, got {k!r}")
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
