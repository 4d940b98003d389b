"""Long MetaSchedule tuning of the 4096^3 matmul on the GPU, resumable, within a time limit.

    python gpu/experiments/06_tune.py --kind fp32 --minutes 8 --work-dir DIR
    python gpu/experiments/06_tune.py --kind fp16 --minutes 8 --work-dir DIR
    python gpu/experiments/06_tune.py --kind fp32 --template --minutes 8 --work-dir DIR
    python gpu/experiments/06_tune.py --kind fp16 --template fp16_mma_template --minutes 8 --work-dir DIR
    python gpu/experiments/06_tune.py --kind fp32 --dry            # no GPU: sketches, postprocs, build

--template searches the design space of one of the notebook's templates (by default
`<kind>_template`, i.e. `fp32_template` or `fp16_template`; `--template fp16_mma_template` names
another), read from notebook 06 itself, so the database comes from exactly the code the notebook
shows, instead of MetaSchedule's schedule rules.

The database (database_workload.json, database_tuning_record.json) is written to --work-dir
(default notebooks/results/<gpu-slug>/tuning/matmul_<kind>_<n>[_template | _mma_template]); a database already there is
resumed, so a long tuning can be spread over several runs. The whole run (tuning, then checking
and timing the best records) ends within --minutes. MetaSchedule's log goes to --log-file
(default /tmp/06_tune_<kind>.log), not to the screen.

At the end: the top records are rebuilt, checked against a float64 reference and timed; a
record whose kernel computes a wrong result is removed from the database (so the notebook never
replays it); one table compares them with cuBLAS.

On the GPU machine `gpu/tune.sh` runs this, resuming one database across calls; the output of
the runs behind each committed database is kept in `results/06_tune.<database name>.txt`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np

import helpers
from lesson_code import template
from variants import describe_cuda
from helpers.tuned import RECORD_FILE, _as_module
from helpers.tuning import SPACES, space_name

KINDS = {
    # kind: (input dtype, accumulate/output dtype, B stored N x K, design space, cuBLAS dtype, tolerance,
    #        default --max-smem-kb)
    # Both C = A @ B with B stored K x N (with B stored N x K, as in notebook 05, random samples of the
    # mma.sync sketch almost never pass the GPU checks); fp16 sums and stores C in fp32.
    "fp32": ("float32", "float32", False, "cuda", "float32", 1e-4, None),
    "fp16": ("float16", "float32", False, "cuda-tensorcore-all", "float16", 1e-3, 160),
}


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kind", choices=sorted(KINDS), required=True)
    ap.add_argument("--n", type=int, default=4096, help="M = N = K (default 4096)")
    ap.add_argument("--trials", type=int, default=2000, help="most candidates to measure in this run")
    ap.add_argument("--minutes", type=float, default=8.0, help="time limit of the whole run")
    ap.add_argument("--per-iter", type=int, default=64, help="candidates per round of the search")
    ap.add_argument("--space", choices=SPACES, default=None, help="design space (default by kind)")
    ap.add_argument("--template", nargs="?", const=True, default=None, metavar="NAME",
                    help="search one of notebook 06's templates instead of the schedule rules: NAME "
                    "(default <kind>_template), a function the notebook defines")
    ap.add_argument("--work-dir", type=Path, default=None)
    ap.add_argument("--log-file", type=Path, default=None)
    ap.add_argument("--top", type=int, default=5, help="records to rebuild, check and time at the end")
    ap.add_argument("--keep", type=int, default=400, help="records kept in the database at the end: the "
                    "best valid ones (failed candidates are dropped), so the committed files stay small")
    ap.add_argument("--max-smem-kb", type=int, default=None,
                    help="tell the search the GPU allows this much (dynamic) shared memory per block "
                    "(default fp32: what the driver reports for a plain launch, 48 KB; fp16: 160 KB; an "
                    "H100 allows 227 KB with opt-in, which TVM's runtime requests for shared.dyn kernels)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--where", action="store_true", help="print the database directory these options "
                    "tune into by default (the committed one, for this machine's GPU) and exit")
    ap.add_argument("--dry", action="store_true", help="no GPU: generate the design spaces, post-process "
                    "samples of them and build them for sm_90; replay and build the database if present")
    args = ap.parse_args(argv)
    if args.n <= 0 or args.trials <= 0 or args.per_iter <= 0 or args.top <= 0 or args.keep <= 0:
        ap.error("--n, --trials, --per-iter, --top and --keep must be positive")
    if not args.minutes > 0:
        ap.error("--minutes must be positive")
    if args.template is True:
        args.template = f"{args.kind}_template"
    if args.template and not args.template.startswith(f"{args.kind}_"):
        ap.error(f"--template {args.template}: a template for --kind {args.kind} is named {args.kind}_...")
    args.pass_config = PASS_CONFIG if args.template else {}  # every build of a template's kernels
    return args


def tuning_target(base, max_smem_kb):
    import tvm

    if not max_smem_kb:
        return base
    attrs = json.loads(str(base))
    attrs.pop("tag", None)
    attrs["max_shared_memory_per_block"] = max_smem_kb * 1024
    return tvm.target.Target(attrs)


def database_name(kind: str, n: int, template: str | None) -> str:
    """matmul_fp16_4096 (schedule rules), matmul_fp16_4096_template (fp16_template),
    matmul_fp16_4096_mma_template (fp16_mma_template): one database per design space."""
    return f"matmul_{kind}_{n}" + (f"_{template.removeprefix(f'{kind}_')}" if template else "")


def default_work_dir(kind: str, n: int, template: str | None) -> Path:
    gpu = helpers.local_gpu_spec().name if helpers.gpu_available() else None
    return helpers.database_dir(database_name(kind, n, template), gpu)


#: The templates' software pipelines copy with cp.async, which this compiler option turns on
#: (notebook 05); every candidate of a template, and its final check, is compiled with it.
PASS_CONFIG = {"tirx.use_async_copy": True}

def dry(args, func, space) -> int:
    """Without a GPU: the design spaces, a few post-processed samples of each, built for sm_90."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    t = time.time()
    gen = helpers.make_space(space)
    mod = _as_module(func)
    ctx = ms.TuneContext(mod, target=tuning_target(tvm.target.Target("nvidia/nvidia-h100"), args.max_smem_kb),
                         space_generator=gen,
                         task_name="main", rand_state=args.seed if args.seed is not None else 1, num_threads=1)
    spaces = list(ctx.generate_design_space())
    print(f"{len(spaces)} design space(s) for {args.kind} with {space_name(space)} ({time.time() - t:.1f} s)")
    listing = helpers.listing_target()
    failures, unbuilt = 0, 0
    for i, sketch in enumerate(spaces):
        kinds = sorted({ln.split('ann_val="')[1].split("_")[0] for ln in str(sketch.trace).splitlines()
                        if 'meta_schedule.auto_tensorize"' in ln}) or ["cuda cores"]
        built, rejected = 0, {}
        for attempt in range(200):  # samples failing a postprocessor (e.g. too much shared memory) are normal
            sch = tvm.s_tir.Schedule(mod)
            trace = sketch.trace
            try:
                # re-sample every decision of the sketch, then post-process (as the search does)
                tvm.s_tir.schedule.Trace(trace.insts, {}).apply_to_schedule(sch, remove_postproc=True)
                failed = next((p for p in gen.postprocs if not p.apply(sch)), None)
                if failed is not None:
                    key = str(failed).split(".")[-1]
                    rejected[key] = rejected.get(key, 0) + 1
                    continue
                with tvm.transform.PassContext(config=args.pass_config):
                    src = helpers.cuda_source(sch, listing)
            except Exception as err:  # noqa: BLE001
                print(f"  sketch {i}: sample {attempt} failed: {str(err).strip().splitlines()[-1][:200]}")
                continue
            built += 1
            if built == 1:
                print(f"  sketch {i} ({', '.join(kinds)}): built a sample after {attempt + 1} tries "
                      f"(rejected by {rejected or 'none'}), {describe_cuda(src)}")
            if built == 3:
                break
        if not built:
            unbuilt += 1
            print(f"  sketch {i} ({', '.join(kinds)}): no sample passed the postprocessors ({rejected})")
    if unbuilt == len(spaces):
        failures += 1  # (one sketch whose random samples all fail is normal: the search favours the others)
    work = args.work_dir or default_work_dir(args.kind, args.n, args.template)
    if (work / RECORD_FILE).exists():
        try:
            best = helpers.replay(work, func)
            helpers.cuda_source(best.sch, listing)
            print(f"database {work.name}: best record replays and builds: {best.describe()}")
        except Exception as err:  # noqa: BLE001
            failures += 1
            print(f"database {work.name}: replay failed: {err}")
    else:
        print(f"no database yet in {work}")
    print(f"dry run done in {time.time() - t:.0f} s, {failures} failure(s)")
    return 1 if failures else 0


def reference(a, b):
    """float64 C = A @ B, on the GPU through torch when it is there."""
    try:
        import torch

        return (torch.from_numpy(a).cuda().double() @ torch.from_numpy(b).cuda().double()).cpu().numpy()
    except Exception:  # noqa: BLE001
        return a.astype(np.float64) @ b.astype(np.float64)


def remove_records(work_dir: Path, bad: list) -> int:
    """Drop the records of wrong kernels from the record file (matched by their stored run_secs)."""
    path = work_dir / RECORD_FILE
    keys = [tuple(k.run_secs) for k in bad]
    kept, dropped = [], 0
    for line in path.read_text().splitlines():
        try:
            secs = tuple(float(x) for x in json.loads(line)[1][1] or [])
        except Exception:  # noqa: BLE001
            kept.append(line)
            continue
        if any(len(secs) == len(k) and all(abs(x - y) <= 1e-15 + 1e-9 * abs(y) for x, y in zip(secs, k)) for k in keys):
            dropped += 1
        else:
            kept.append(line)
    path.write_text("\n".join(kept) + ("\n" if kept else ""))
    return dropped


def prune(work_dir: Path, keep: int) -> int:
    """Keep the `keep` fastest valid records (in their original order); drop failed ones."""
    path = work_dir / RECORD_FILE
    lines = path.read_text().splitlines()
    scored = []
    for i, line in enumerate(lines):
        try:
            secs = [float(x) for x in json.loads(line)[1][1] or []]
        except Exception:  # noqa: BLE001
            continue
        if secs and max(secs) < 1e9:
            scored.append((float(np.median(secs)), i))
    chosen = sorted(i for _, i in sorted(scored)[:keep])
    path.write_text("".join(lines[i] + "\n" for i in chosen))
    return len(lines) - len(chosen)


def main(argv=None) -> int:
    args = parse(argv)
    if args.where:
        print(default_work_dir(args.kind, args.n, args.template))
        return 0
    t0 = time.time()
    dtype, acc, trans_b, default_space, blas_dtype, tol, smem = KINDS[args.kind]
    space = args.space or default_space
    if args.template:
        if args.space:
            print("--template and --space exclude each other", file=sys.stderr)
            return 2
        space = template(args.template)
    if args.max_smem_kb is None:
        args.max_smem_kb = smem
    n = args.n
    func = helpers.matmul_workload(n, n, n, dtype, acc, transpose_b=trans_b)
    if args.dry:
        return dry(args, func, space)
    if not helpers.gpu_available():
        print("no GPU visible: use --dry here", file=sys.stderr)
        return 2

    spec = helpers.local_gpu_spec()
    work = args.work_dir or default_work_dir(args.kind, n, args.template)
    log_file = args.log_file or Path(f"/tmp/06_tune_{args.kind}.log")
    flop = 2.0 * n * n * n
    print(f"GPU {spec.name}; tuning {args.kind} {n}^3 with {space_name(space)} into {work}; log in {log_file}",
          flush=True)
    before = 0
    if (work / RECORD_FILE).exists():
        before = len((work / RECORD_FILE).read_text().splitlines())
        print(f"resuming: {before} records already in the database", flush=True)

    blas_ms = helpers.cublas_time(n, n, n, blas_dtype, transpose_b=trans_b)
    print(f"cuBLAS {blas_dtype}: {blas_ms:.4f} ms, {flop / blas_ms / 1e9:,.1f} TFLOP/s" if blas_ms else "no cuBLAS baseline", flush=True)
    run = tune_within(args, func, space, work, log_file, t0)
    rows, best_ok = check_top_records(args, func, work, blas_ms)
    report(args, work, before, run, rows, best_ok, blas_ms, t0)
    return 0


def tune_within(args, func, space, work, log_file, t0):
    """MetaSchedule's search into the database at `work`, for what is left of --minutes once the
    final check's time is set aside; its run, or None if there was no time or it failed."""
    # leave time for the final check: rebuilding, checking and timing --top records
    reserve = 60 + 15 * args.top
    tune_minutes = (args.minutes * 60 - (time.time() - t0) - reserve) / 60
    run = None
    if tune_minutes < 1:
        print(f"only {tune_minutes:.1f} min left for tuning: skipping it")
    else:
        try:
            target = tuning_target(helpers.make_target(), args.max_smem_kb)
            print(f"target: {target}", flush=True)
            run = helpers.tune(func, work, trials=args.trials, minutes=tune_minutes, space=space, target=target,
                              trials_per_iter=args.per_iter, seed=args.seed, log_file=log_file,
                              pass_config=args.pass_config or None)
            print(run, flush=True)
        except Exception:  # noqa: BLE001
            print("tuning failed:\n" + traceback.format_exc()[-3000:], flush=True)
    return run


def check_top_records(args, func, work, blas_ms):
    """The database's --top records rebuilt, checked against float64 and timed, beside cuBLAS; a
    wrong kernel's record removed, the database pruned to --keep. Returns the table's rows
    (name, ms, TFLOP/s, error, % of cuBLAS) and the fastest correct record (ms, rank) or None."""
    import tvm

    dtype, acc, trans_b, _, blas_dtype, tol, _ = KINDS[args.kind]
    n, flop = args.n, 2.0 * args.n ** 3
    rows = []
    if blas_ms:
        rows.append((f"cuBLAS {blas_dtype}{' (B transposed)' if trans_b else ''}", blas_ms, flop / blas_ms / 1e9, None, "100%"))
    try:
        db = helpers.open_database(work)
        tops = helpers.top_kernels(db, func, args.top, source=work)
    except Exception as err:  # noqa: BLE001
        print(f"no records to check: {err}")
        tops = []
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (n, n)).astype(dtype)
    b = rng.uniform(-1, 1, (n, n)).astype(dtype)
    expected = reference(a, np.ascontiguousarray(b.T) if trans_b else b) if tops else None
    dev = helpers.device()
    bad = []
    best_ok = None
    for rank, k in enumerate(tops, 1):
        name = f"MetaSchedule #{rank} (tuning: {k.tuning_ms:.4f} ms)"
        try:
            with tvm.transform.PassContext(config=args.pass_config):
                ex = helpers.build(k.sch)
            args_dev = [tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev),
                        tvm.runtime.tensor(np.full((n, n), np.nan, dtype=acc), dev)]
            ex.mod["main"](*args_dev)
            dev.sync()
            err = helpers.relative_error(args_dev[2].numpy(), expected)
            if not err <= tol:
                bad.append(k)
                rows.append((name + " WRONG", None, None, err, ""))
                continue
            ms_ = float(np.median(helpers.time_function(ex.mod, dev, args_dev, repeat=20)))
            rows.append((name, ms_, flop / ms_ / 1e9, err, f"{blas_ms / ms_:.1%}" if blas_ms else ""))
            if best_ok is None or ms_ < best_ok[0]:
                best_ok = (ms_, rank)
        except Exception as err:  # noqa: BLE001
            rows.append((name + f" FAILED: {str(err).strip().splitlines()[-1][:80]}", None, None, None, ""))
    if bad:
        print(f"removed {remove_records(work, bad)} record(s) of wrong kernels from the database")
    if (work / RECORD_FILE).exists():
        dropped = prune(work, args.keep)
        if dropped:
            print(f"pruned {dropped} record(s): failed candidates and all but the best {args.keep}")
    return rows, best_ok


def report(args, work, before, run, rows, best_ok, blas_ms, t0) -> None:
    """The database's size, what this run's search did, the checked records' table and the best."""
    blas_dtype, flop = KINDS[args.kind][4], 2.0 * args.n ** 3
    total = len((work / RECORD_FILE).read_text().splitlines()) if (work / RECORD_FILE).exists() else 0
    sizes = ", ".join(f"{p.name} {p.stat().st_size / 1e6:.2f} MB" for p in sorted(work.glob("*.json")))
    print(f"\ndatabase {work}: {total} records ({total - before:+d} this run); {sizes}")
    if run is not None:
        print(f"this run: {run.trials} candidates measured ({run.failed} failed) in {run.seconds:.0f} s, "
              f"{'stopped by the time limit' if run.stopped_for_time else 'trial budget used'}")
    print(f"\n{'variant':58s} {'ms':>9s} {'TFLOP/s':>9s} {'rel err':>9s} {'% cuBLAS':>9s}")
    for name, ms_, tf, err, pct in rows:
        print(f"{name:58s} {'-' if ms_ is None else format(ms_, '9.4f'):>9} "
              f"{'' if tf is None else format(tf, '9.2f'):>9} {'' if err is None else format(err, '9.1e'):>9} {pct:>9s}")
    if best_ok:
        print(f"\nbest checked kernel: #{best_ok[1]}, {best_ok[0]:.4f} ms, {flop / best_ok[0] / 1e9:,.1f} TFLOP/s"
              + (f", {blas_ms / best_ok[0]:.1%} of cuBLAS {blas_dtype}" if blas_ms else ""))
    print(f"total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
