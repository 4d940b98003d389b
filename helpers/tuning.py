"""Running a MetaSchedule search: design spaces and templates, a budget, a quiet log and a progress bar.

    spaces = helpers.design_spaces(func, "cuda")                       # the sketches; no GPU needed
    run = helpers.tune(func, "tuning/fp32", trials=64, minutes=2.5)   # needs a GPU
    print(run.best.sch.trace)

`tune` measures every candidate kernel on the GPU, so it refuses to start without one. It
stops after `trials` measured candidates or, when `minutes` is given, before starting a round
of candidates that would not finish in time. MetaSchedule's own log (every candidate, every
error, the design spaces) goes to a file, not to the notebook; the notebook shows one progress
bar (see `helpers.tuning_log`). A work directory that already holds a database is resumed: its
records seed the search and the cost model.

This module holds the search: the workload (`matmul_workload`), the design spaces (`SPACES`,
`make_space`, templates) and what the search does inside them (`design_spaces`,
`sample_candidates`, `candidate_features`), and `tune`. Reading the databases a search writes,
e.g. replaying a committed one without a GPU, is `helpers.tuned`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import statistics
import time
from pathlib import Path

import tvm
import tvm_ffi
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule import _ffi_api
from tvm.script import tirx as T

from . import env
from .kernels import check_matmul, check_number
from .tuned import TunedKernel, _as_module, _flop_count, _median_sec, best_record, json_database
from .tuning_log import _MS_LOGGER, _log_func, _Progress, _quiet

#: The named design spaces `tune` knows (a `space` may also be a schedule function: see
#: `make_space`). "cuda": MetaSchedule's default rules for CUDA cores.
#: "cuda-tensorcore": its default tensor-core rules (for a float16 matmul the WMMA rule applies
#: first, so these sketches use WMMA). "cuda-mma": only the tensor-core rule built on
#: mma.sync + ldmatrix with a cp.async software pipeline. "cuda-tensorcore-all": the union
#: of the two, so the search (and its cost model) chooses. "llvm": CPUs (the unit tests).
SPACES = ("cuda", "cuda-tensorcore", "cuda-mma", "cuda-tensorcore-all", "llvm")


# ---------------------------------------------------------------- the workload


def matmul_workload(M: int, N: int, K: int, dtype: str = "float32", acc_dtype: str | None = None,
                    transpose_b: bool = False) -> tvm.tirx.PrimFunc:
    """C[M, N] = A[M, K] @ B[K, N] as a PrimFunc to tune: inputs in `dtype`, sums and output in
    `acc_dtype` (default: `dtype`; float16 inputs with float32 sums is the tensor-core case).
    With `transpose_b` B is stored N x K (C = A @ B.T), as in notebook 05.

    It carries the `tirx.noalias` attribute, so the database written by tuning it answers
    queries for it (a PrimFunc without the attribute is a different workload)."""
    check_matmul(M, N, K, dtype=dtype, acc_dtype=acc_dtype)
    M, N, K, acc = int(M), int(N), int(K), acc_dtype or dtype  # a NumPy size would make another workload
    b_shape = (N, K) if transpose_b else (K, N)

    def b_at(B, vj, vk):
        return B[vj, vk] if transpose_b else B[vk, vj]

    def widen(x):
        # no cast when the dtypes agree: a cast, even a no-op, is part of the workload's structure,
        # so an fp32 workload with casts would match no committed fp32 database
        return x if acc == dtype else T.cast(x, acc)

    @T.prim_func(s_tir=True)
    def matmul(A: T.Buffer((M, K), dtype), B: T.Buffer(b_shape, dtype), C: T.Buffer((M, N), acc)):
        T.func_attr({"tirx.noalias": True})
        for i, j, k in T.grid(M, N, K):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.cast(0, acc)
                C[vi, vj] = C[vi, vj] + widen(A[vi, vk]) * widen(b_at(B, vj, vk))

    return matmul


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
    from . import intrinsics  # noqa: F401  (registers the WMMA / mma intrinsics, TVM's and the course's)

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
    check_number("tries", tries)
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


def _check_budget(trials, trials_per_iter, minutes, build_timeout) -> None:
    check_number("trials", trials, " (the number of candidate kernels to measure)")
    check_number("trials_per_iter", trials_per_iter, " (candidates measured per round)")
    if minutes is not None:
        check_number("minutes", minutes, " (the time limit of the search) or None", integer=False)
    check_number("build_timeout", build_timeout, " (the seconds one candidate may take to build)", integer=False)


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
        return head + f"\nbest in the database: {self.best.describe()}"


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
    _check_budget(trials, trials_per_iter, minutes, build_timeout)
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

    database = json_database(work_dir)
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
