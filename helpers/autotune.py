"""Searching a kernel's own design space with MetaSchedule's machinery: builder, runner, database.

MetaSchedule's schedule rules end at `mma.sync`: a kernel written instruction by instruction, as
notebook 07 writes its wgmma + TMA kernel in TIRx, has no schedule for them to rewrite. Its knobs
are the arguments of the function that writes it (block width, pipeline depth, tile order), so its
design space is a grid of those arguments. What MetaSchedule still brings is everything else: a
builder that compiles candidates in parallel processes, a runner that times each on the GPU, and
a database that keeps every measurement keyed by the workload, so that the best configuration for
each shape replays later, without a GPU. Triton's `@triton.autotune` (a list of configs, each timed,
the best kept per key) and CUTLASS's profiler (every kernel instance timed) do the same.

    space = helpers.configurations(block_n=[128, 256], stages=[3, 4], keep=fits)  # list of dicts
    found = helpers.search(workload, space, make_kernel, "tuning/hopper", inputs=[a, b, c], expected=ref,
                           target="sm_90a", tir_pipeline="tirx")  # needs the GPU
    config = helpers.best_configuration("tuning/hopper", workload)   # a dict; needs no GPU

Each record's trace is one instruction on the workload (the plain matmul of that shape): an
annotation holding the configuration. The workload says *what* is computed, the annotation *how*,
and `make_kernel(**config)` turns it back into the kernel.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import itertools
import statistics
from pathlib import Path

import numpy as np
import tvm
from tvm.s_tir import meta_schedule as ms

from . import env
from .bench import _to_device, relative_error
from .kernels import _module
from .tuned import _as_module, json_database, open_database, top_kernels

#: The annotation on the workload's root block that holds a record's configuration.
ANNOTATION = "search.config"
#: The latency MetaSchedule gives a candidate that failed (tuned.py skips records at or above 1e9 s).
FAILED_SECS = 1e10


@dataclasses.dataclass
class Candidate:
    """One configuration of a search: its median time on the GPU, or why it has none."""

    config: dict
    ms: float | None = None
    error: str | None = None

    def __str__(self) -> str:
        return f"{format_config(self.config)}: " + (f"{self.ms:.4f} ms" if self.ms is not None else self.error)


def format_config(config: dict) -> str:
    """`block_n=256 group=8 stages=4`: a configuration as its record's annotation writes it."""
    return " ".join(f"{key}={config[key]!r}" for key in sorted(config))


def parse_config(text: str) -> dict:
    """The configuration `format_config` wrote."""
    pairs = (item.split("=", 1) for item in text.split())
    return {key: ast.literal_eval(value) for key, value in pairs}


def configurations(keep=None, **choices) -> list[dict]:
    """Every combination of the `choices` (name -> list of values) for which `keep(config)` is
    true: the design space, e.g. `configurations(block_n=[128, 256], stages=[3, 4], keep=fits)`."""
    if not choices:
        raise ValueError("name at least one knob, e.g. configurations(stages=[3, 4])")
    for name, values in choices.items():
        if not isinstance(values, (list, tuple)) or not values:
            raise ValueError(f"{name} needs a non-empty list of values, got {values!r}")
        for v in values:
            if not isinstance(v, (int, float, str)) or (isinstance(v, str) and (not v or " " in v)):
                raise ValueError(f"{name}={v!r}: a value is a number or a string without spaces")
    grid = [dict(zip(choices, values)) for values in itertools.product(*choices.values())]
    kept = [config for config in grid if keep is None or keep(config)]
    if not kept:
        raise ValueError(f"none of the {len(grid)} configurations passes `keep`: the space is empty")
    return kept


def _trace(workload: tvm.IRModule, config: dict) -> tvm.s_tir.Trace:
    sch = tvm.s_tir.Schedule(workload)
    sch.annotate(sch.get_sblock("root"), ANNOTATION, format_config(config))
    return sch.trace


def config_of(sch: tvm.s_tir.Schedule) -> dict:
    """The configuration a replayed record (a schedule of the workload) carries."""
    annotations = sch.get(sch.get_sblock("root")).annotations
    if ANNOTATION not in annotations:
        raise LookupError(f"this schedule carries no {ANNOTATION!r} annotation: it is not a record of `search`")
    return parse_config(str(annotations[ANNOTATION]))


def _build(mod, target, _params, tir_pipeline="default"):
    """The builder's compile step (run in its worker processes): the module through `tir_pipeline`."""
    return tvm.compile(mod, target=target, tir_pipeline=tir_pipeline).mod


def _check(artifact: str, args, output, device, expected, tol: float) -> str | None:
    """Run a built candidate once on the device arrays `args`, its output (the last) reset from
    `output` first; why it is wrong, or None when it matches `expected`."""
    rt = tvm.runtime.load_module(artifact)
    args[-1] = tvm.runtime.tensor(output, device)  # never judged on an earlier candidate's output
    rt[rt.entry_name](*args)
    err = relative_error(args[-1].numpy(), expected)
    return None if err <= tol else f"wrong result: relative error {err:.1e} over {tol:.0e}"


def search(workload, configs, make_kernel, work_dir, *, inputs, expected, target, tir_pipeline="default",
           tol: float = 1e-3, builder=None, runner=None) -> list[Candidate]:
    """Build `make_kernel(**config)` for every configuration in parallel (MetaSchedule's
    LocalBuilder), run each once on `inputs` and check its output (the last input) against
    `expected`, time the correct ones (LocalRunner), and commit every candidate to the JSON
    database in `work_dir` under `workload` (failed ones as MetaSchedule does, with 1e10 s).
    Returns the candidates, fastest first. Needs the target's device: a GPU for a CUDA target."""
    target = env.make_target(target) if not isinstance(target, tvm.target.Target) else target
    if target.kind.name == "cuda" and not env.gpu_available():
        raise RuntimeError("search times every candidate on the GPU, and no CUDA GPU is visible: replay a "
                           "committed database with best_configuration instead")
    configs = list(configs)
    if not configs:
        raise ValueError("no configurations to search")
    expected = np.asarray(expected)
    if len(inputs) < 1 or np.shape(inputs[-1]) != expected.shape:
        raise ValueError(f"the last input is the output: its shape {np.shape(inputs[-1]) if inputs else None} "
                         f"must be the expected result's, {expected.shape}")
    workload = _as_module(workload)
    mods = [_module(make_kernel(**config)) for config in configs]
    builder = builder or ms.builder.LocalBuilder(f_build=functools.partial(_build, tir_pipeline=tir_pipeline),
                                                 timeout_sec=120)
    built = builder.build([ms.builder.BuilderInput(mod, target) for mod in mods])
    device_type = "cpu" if target.kind.name == "llvm" else target.kind.name
    device = tvm.runtime.device(device_type, 0)
    candidates = [Candidate(config, error=b.error_msg) for config, b in zip(configs, built)]
    args = _to_device(inputs, device)  # once: every candidate reads the same inputs
    for c, b in zip(candidates, built):
        if c.error is None:
            c.error = _check(b.artifact_path, args, inputs[-1], device, expected, tol)
    runnable = [i for i, c in enumerate(candidates) if c.error is None]
    args_info = [ms.arg_info.ArgInfo.from_prim_func(mod["main"]) for mod in mods]
    runner = runner or ms.runner.LocalRunner(evaluator_config=ms.runner.EvaluatorConfig(
        number=1, repeat=5, min_repeat_ms=25, enable_cpu_cache_flush=False))
    futures = runner.run([ms.runner.RunnerInput(built[i].artifact_path, device_type, args_info[i])
                          for i in runnable])
    secs = [[FAILED_SECS] for _ in configs]
    for i, future in zip(runnable, futures):
        result = future.result()
        if result.error_msg:
            candidates[i].error = result.error_msg.splitlines()[0]
        else:
            secs[i] = [float(s) for s in result.run_secs]
            candidates[i].ms = statistics.median(secs[i]) * 1e3
    Path(work_dir).mkdir(parents=True, exist_ok=True)
    database = json_database(work_dir)
    entry = database.commit_workload(workload)
    for i, config in enumerate(configs):
        database.commit_tuning_record(ms.database.TuningRecord(
            _trace(workload, config), entry, secs[i], target, args_info[i]))
    return sorted(candidates, key=lambda c: (c.ms is None, c.ms or 0.0))


def ranked_configurations(path, workload, k: int = 5) -> list[Candidate]:
    """The `k` fastest correct configurations the database at `path` holds for `workload`,
    with the median time measured while searching (no GPU needed)."""
    found = top_kernels(open_database(path), workload, k, source=path)
    return [Candidate(config_of(t.sch), ms=t.tuning_ms) for t in found]


def best_configuration(path, workload) -> dict:
    """The fastest correct configuration the database at `path` holds for `workload` (no GPU needed)."""
    return ranked_configurations(path, workload, 1)[0].config
