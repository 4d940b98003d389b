"""Notebook 08's plumbing: its problem and baselines, notebook 07's recorded kernel, the tables of its
ladder, the design space it searches, the replay of that search, the sweep over sizes and the fp16
series. The kernels stay in the notebook; these only set up, measure, read records and print, so
the lecture shows the kernel's steps and not the bookkeeping around them."""

from __future__ import annotations

import dataclasses
import tempfile

import numpy as np

from . import autotune, bench, env, kernels, matmul, plots, tuned, tuning
from .measurement import Measurement


def cases(nb, M: int, N: int, K: int):
    """The fp16 matmul at M x N x K writing fp32 C and fp16 C, each with the cuBLAS that writes the
    same C type as its baseline (timed in the same rounds on a Hopper GPU), for `nb.measure(**case)`."""
    fp32 = matmul.matmul_case(M, N, K, "float16", "float32")  # as in notebook 07
    cublas, cublas_fp32c = (nb.cublas_matmul(M, N, K, "float16", out_dtype=o, arch="sm_90a") for o in (None, "float32"))
    fp32 |= dict(baseline=cublas_fp32c, arch="sm_90a", tir_pipeline="tirx")
    a, b, _ = fp32["args"]
    fp16 = fp32 | dict(args=[a, b, np.zeros((M, N), "float16")], bytes=2.0 * (M * K + K * N + M * N), baseline=cublas)
    return fp32, fp16


def recorded07(nb, name: str) -> Measurement | None:
    """Notebook 07's measurement of this name, from its records for this GPU (without one, for the GPU
    whose records this notebook shows)."""
    return next((m for m in bench.recorded_measurements("07_hopper_wgmma_tma", nb.records_gpu) if m.name == name), None)


def ladder_table(steps, *cases) -> str:
    """The ladder so far, one table per C type (per case: fp32 C, fp16 C), each against its cuBLAS."""
    done = [m for m in steps if m is not None]
    out = []
    for case in cases:
        blas = case["baseline"]
        rows = [m for m in done if ("fp16 C" in m.name) == (case["args"][2].dtype == np.float16)]
        if rows:
            out.append(plots.table(rows + [blas], baseline=blas))
    return "\n".join(out)


#: The steps of section 1 that section 2's search picks among, by the name of each step's kernel function.
STEP_KERNELS = ["persistent_matmul", "persistent_matmul_tma_store", "persistent_matmul_pingpong"]


def hopper_space(m, n, k, ctas, limit):
    """The persistent kernel's design space at one shape, for a grid of `ctas` blocks: every step's kernel
    (`kernel`, one of STEP_KERNELS), block height and width, depth and tile order whose tiles divide the
    problem and whose stages (and buffers of C) fit `limit` bytes of a block's shared memory."""
    from .lessons.hopper_wgmma_tma import BM, shared_bytes

    registers, tma_store, pingpong = STEP_KERNELS

    def fits(c):
        tiles = m // c["block_m"] * (n // c["block_n"])
        return (m % (c["block_m"] * c["group"]) == 0 and n % c["block_n"] == 0
                # ping-pong: a whole 128 x 128 tile's accumulators per consumer at most
                and not (c["kernel"] == pingpong and (c["block_n"] > 128 or c["block_m"] < BM))
                # tiles narrower or lower than 128 x 128 only where those would leave SMs idle
                and (min(c["block_m"], c["block_n"]) >= 128 or m // BM * n // 128 < ctas)
                and (c["group"] == 1 or tiles > ctas)  # in a single wave of tiles, the order cannot matter
                and shared_bytes(c["block_n"], c["stages"], c["kernel"] == tma_store, c["block_m"]) <= limit)

    return autotune.configurations(block_m=[64, 128], block_n=[64, 128, 256], stages=[3, 4, 5, 6, 7],
                                   group=[1, 2, 4, 8, 16], kernel=STEP_KERNELS, keep=fits)


def step_config(config: dict) -> dict:
    """A configuration of the search as the notebook's `hopper_kernel` takes it: the committed searches, made
    while one kernel function took flags for steps 3 and 4, say `pingpong` and `tma_store` for `kernel`."""
    config = dict(config)
    flags = config.pop("pingpong", False), config.pop("tma_store", False)
    if "kernel" in config:
        return config
    if all(flags):
        raise ValueError(f"no step has both ping-pong consumers and the TMA store: {config}")
    return config | {"kernel": STEP_KERNELS[2 if flags[0] else 1 if flags[1] else 0]}


def shared_memory_limit(nb, hopper: bool) -> int:
    """The shared memory a block may use: this GPU's on a Hopper GPU, else an H100's (sm_90), whose
    records are shown."""
    return nb.spec.max_shared_memory_per_block if hopper else env.arch_constants("9.0")["smem_block"]


def search_or_replay(nb, run: bool, space, make, case, shape) -> list:
    """On a Hopper GPU, search `space` now (build each configuration with `make(**config)`, check it
    against the reference, time the correct ones) into a scratch database; elsewhere the five fastest
    of the committed search at this shape. Prints what it did and the five fastest."""
    workload = tuning.matmul_workload(*shape, "float16", "float32")  # what is computed: the database's key
    committed = tuned.committed_database("hopper_persistent", nb.spec.name if nb.live else None)
    print(f"{len(space)} configurations at {'x'.join(map(str, shape))}, the first: {autotune.format_config(space[0])}")
    if run:
        found = autotune.search(workload, space, lambda **c: make(**c), tempfile.mkdtemp(), inputs=case["args"],
                                expected=case["expected"](), target="sm_90a", tir_pipeline="tirx")
        timed = [f for f in found if f.ms is not None]
        print(f"searched now: {len(timed)} of {len(found)} configurations correct and timed; the five fastest:")
    elif committed is not None:
        timed = [dataclasses.replace(c, config=step_config(c.config))
                 for c in autotune.ranked_configurations(committed, workload, 5)]
        print(f"no Hopper GPU here: the five fastest in the committed database ({committed.parent.parent.name})")
    else:
        timed = []
        print("no Hopper GPU here and no committed database: run gpu/experiments/07_search.py on one")
    for f in timed[:5]:
        print(f"  {f}")
    return timed


def searched_config(nb, m, n, k):
    """The committed search's fastest configuration at this shape, or None where it holds none."""
    committed = tuned.committed_database("hopper_persistent", nb.spec.name if nb.live else None)
    try:
        return step_config(autotune.best_configuration(committed, tuning.matmul_workload(m, n, k, "float16", "float32"))) \
            if committed else None
    except LookupError:  # the database holds no search at this shape
        return None


def _missing(name):
    return Measurement(name, None, source="missing")


def at_size(nb, run: bool, shape, kernels: dict):
    """(each of `kernels`, cuBLAS fp32 C) at one size: each kernel (name -> a function making it, or None)
    checked and timed on a Hopper GPU interleaved with cuBLAS from a CUDA graph; elsewhere built, and the
    records shown."""
    m, n, k = shape
    blas_name = f"cuBLAS {'x'.join(map(str, shape))}, fp32 C (CUDA graph)"
    blas = (nb.cublas_matmul(m, n, k, "float16", out_dtype="float32", graph=True, name=blas_name, quiet=True)
            if run else nb.recorded_or_live(blas_name) or _missing(blas_name))
    rng = np.random.default_rng(1)
    a_, b_ = (rng.uniform(-1, 1, s).astype("float16") if run else np.empty(s, "float16") for s in ((m, k), (k, n)))
    return tuple(nb.measure(name, make(), [a_, b_, np.zeros((m, n), "float32")],
                            lambda: a_.astype("float64") @ b_.astype("float64"), flops=2.0 * m * n * k, tol=1e-3,
                            baseline=blas, quiet=True, arch="sm_90a", tir_pipeline="tirx")
                 if make else _missing(name) for name, make in kernels.items()) + (blas,)


#: The sizes of section 3's sweep: squares from 512 to 8192, and notebook 03's rectangle.
SIZES = [(n, n, n) for n in (512, 1024, 2048, 4096, 8192)] + [(1024, 512, 2048)]


def sweep(nb, run: bool, first, searched, persistent, sizes=SIZES) -> dict:
    """Section 3's kernels at each size, by `at_size`: `first(m, n, k)` (a block per tile), `persistent(m, n, k)`
    and `searched(m, n, k, **config)` in the committed search's fastest configuration for that shape (none
    where the search has no result). Returns shape -> (first, persistent, searched, cuBLAS)."""
    def kernels_at(m, n, k):
        size, config = f"{m}x{n}x{k}", searched_config(nb, m, n, k)
        return {f"first kernel {size}": lambda: first(m, n, k), f"persistent {size}": lambda: persistent(m, n, k),
                f"searched {size}": (lambda: searched(m, n, k, **config)) if config else None}

    return {shape: at_size(nb, run, shape, kernels_at(*shape)) for shape in sizes}


def _earlier(nb, notebook, shape):  # that notebook's final kernel at this size, from its records
    name = f"final kernel {'x'.join(map(str, shape))}"
    found = [m for m in bench.recorded_measurements(notebook, nb.records_gpu) if m.name == name]
    return found[0] if found else _missing(name)


def size_table(nb, by_size: dict):
    """Print the sweep's TFLOP/s by size (first, persistent, searched, cuBLAS in searched's rounds, and 04's
    and 05's final kernels from their records) and draw it; returns the figure."""
    rows = {}
    for shape, (first, persistent, searched, blas) in by_size.items():
        # cuBLAS as it ran in the searched kernel's own rounds: the time its ratio was divided by
        rows[shape] = (first, persistent, searched, searched.baseline_in_rounds(blas)) + tuple(
            _earlier(nb, n, shape) for n in ("04_matmul_shared_blocking", "05_tensor_core_tensorization"))
    labels = [f"{s[0]}³" if len(set(s)) == 1 else "x".join(map(str, s)) for s in rows]
    kinds = ["first kernel (a block per tile)", "persistent, groups of 8 rows", "persistent, searched",
             "cuBLAS, fp32 C (searched's rounds)", "04's fp32 kernel (CUDA cores)", "05's WMMA kernel"]
    print(f"{'size':>14s} {'first':>8s} {'persistent':>10s} {'searched':>9s} {'cuBLAS':>8s} {'04 fp32':>8s}"
          f" {'05 WMMA':>8s}  TFLOP/s; searched vs cuBLAS")
    for label, found in zip(labels, rows.values()):
        rates = "".join(f"{m.tflops:>9.1f}" if m.ok else f"{'-':>9s}" for m in found)
        share = found[2].of(found[3])
        print(f"{label:>14s}{rates[:9]} {rates[9:18]:>10s}{rates[18:]}" + (f"  {share:.0%}" if share else ""))
    return plots.sweep(labels, dict(zip(kinds, zip(*rows.values()))), xlabel="M x N x K", metric="tflops",
                       title="matmul by size, fp32 C")


def _best_fp16(notebook, flops):
    found = [m for m in bench.recorded_measurements(notebook) if m.ok and m.dtype == "float16" and m.flops == flops]
    kernels = [m for m in found if not m.name.startswith("cuBLAS")]
    best = max(kernels, key=lambda m: m.tflops) if kernels else None
    # the cuBLAS it was timed with (C in the same type), else the notebook's first
    blas = [m for m in found if best is not None and m.name == best.versus] or [
        m for m in found if m.name.startswith("cuBLAS")]
    return (best, blas[0]) if best is not None and blas else None


def fp16_series(runs: dict, flops: float, *baselines) -> None:
    """Print the best fp16 kernel of notebooks 05-08, each as a fraction of the cuBLAS it was timed with."""
    series = {"05, hand-written WMMA": _best_fp16("05_tensor_core_tensorization", flops),
              "06, tuned by MetaSchedule": _best_fp16("06_metaschedule_tuning", flops),
              "07, wgmma + TMA in TIRx": _best_fp16("07_hopper_wgmma_tma", flops)}
    done = [m for m in runs.values() if m is not None and m.ok]
    best08 = max(done, key=lambda m: m.tflops) if done else None
    if best08 is not None:  # against the cuBLAS it was timed with: C in the same type
        series["08, persistent"] = (best08, next((b for b in baselines if b.name == best08.versus), baselines[0]))
    for step, found in series.items():
        if found is None:
            print(f"{step}: no recorded result")
            continue
        m, blas = found
        print(f"{step:28s} {m.tflops:6.1f} TFLOP/s = {m.of(blas):4.0%} of {blas.name}")
        print(f"    {m.name}; {m.gpu}, {m.date}")


def wave_footprint(order, tiles_m: int, tiles_n: int, ctas: int, group: int) -> tuple[int, int]:
    """How many block rows of A and block columns of B the first `ctas` work items read in `order`."""
    tiles = [order(t, tiles_m, tiles_n, group) for t in range(min(ctas, tiles_m * tiles_n))]
    return len({r for r, _ in tiles}), len({c for _, c in tiles})


def order_excerpt(order, ctas: int, *groups) -> str:
    """The tiles block 0 takes first, and what the first wave of `ctas` tiles reads, for each `group`,
    at 4096^3 and 8192^3 in tiles of 128 x 256: the excerpt of a step whose only change is the order."""
    out = []
    for group in groups:
        walk = ", ".join(f"({r},{c})" for r, c in (order(i * ctas, 32, 16, group) for i in range(4)))
        feet = "; ".join(f"{n}³: {'{} A rows + {} B columns'.format(*wave_footprint(order, n // 128, n // 256, ctas, group))}"
                         for n in (4096, 8192))
        out.append(f"group={group}: block 0 takes tiles {walk}, ...\n    first wave of {ctas} tiles reads {feet}")
    return "\n".join(out)


def check_order(order, tiles_m: int, tiles_n: int, group: int) -> None:
    """Assert that `order` (work item -> (row, column) in tiles) is the column-band order: every tile
    once, and `group` block columns swept one row at a time. Raises AssertionError saying what is wrong."""
    tiles = [tuple(int(x) for x in order(t, tiles_m, tiles_n, group)) for t in range(tiles_m * tiles_n)]
    outside = [t for t in tiles if not (0 <= t[0] < tiles_m and 0 <= t[1] < tiles_n)]
    assert not outside, f"tile {outside[0]} is outside the {tiles_m} x {tiles_n} tiles of C"
    twice = [t for t in set(tiles) if tiles.count(t) > 1]
    assert not twice, f"tile {twice[0]} comes {tiles.count(twice[0])} times, so others never do"
    for t in range(len(tiles) - 1):
        (r, c), (r2, c2) = tiles[t], tiles[t + 1]
        if (t + 1) % group:  # within a run of `group` work items: the next column of the same row and band
            assert (r2, c2) == (r, c + 1) and c // group == c2 // group, \
                f"work items {t} and {t + 1} are tiles {(r, c)} and {(r2, c2)}: walk along a row within a band"
        elif (t + 1) % (group * tiles_m):  # the next row of the same band of columns
            assert (r2, c2) == (r + 1, c + 1 - group), \
                f"after tile {(r, c)} the band goes on at the next row, tile {(r + 1, c + 1 - group)}, not {(r2, c2)}"


def check_tile_choice(block_m, block_n, persistent_matmul, m: int = 1024, sms: int = 132) -> None:
    """The warm-up's check: enough tiles of block_m x block_n for every SM at m^3, none bigger would do,
    and the persistent kernel with them assembles for sm_90a. Prints what is right or wrong."""
    try:
        tiles = (m // block_m) * (m // block_n)
        assert tiles >= sms, f"{tiles} tiles of {block_m} x {block_n} leave SMs idle"
        bigger = [(bm, bn) for bm in (64, 128) for bn in (64, 128, 256)
                  if m // bm * (m // bn) >= sms and bm * bn > block_m * block_n]
        assert not bigger, f"{bigger[0][0]} x {bigger[0][1]} tiles are enough too, each with more work"
        _assembles(persistent_matmul(m, m, m, sms, group=1, block_m=block_m, block_n=block_n))
        print(f"correct: {tiles} tiles of {block_m} x {block_n}; the kernel assembles for sm_90a")
    except (AssertionError, ValueError) as err:  # ValueError: a block the kernel cannot be
        print("not yet:", err)
    except TypeError:  # an answer is still `...`
        print("not yet: count the tiles, (m // block_m) * (m // block_n), for each block you may choose")


def _assembles(kernel) -> None:
    cuda = kernels.build(kernel, "sm_90a", tir_pipeline="tirx").mod.imports[0].inspect_source()
    assert kernels.device_code(cuda, "sm_90a") > 0, "ptxas made no machine code for sm_90a"


def check_column_order(order, persistent_matmul, nb=None, case=None) -> None:
    """The tile-order exercise: `order` checked on the CPU (`check_order` on 32 x 16 tiles in bands of 4),
    then the persistent kernel built with it for sm_90a; with `nb` and `case` (on a Hopper GPU) also run
    at the case's shape and checked against NumPy before it is timed. Prints what is right or wrong."""
    try:
        check_order(order, tiles_m=32, tiles_n=16, group=4)
        _assembles(persistent_matmul(4096, 4096, 256, 132, group=4, order=order))
        print("correct: every tile once, bands of 4 columns row by row; the kernel assembles for sm_90a")
    except AssertionError as err:
        print("not yet:", err)
        return
    except TypeError:  # an answer is still `...`
        print("not yet: fill in band and inner first, as grouped_order does with rows and columns swapped")
        return
    if nb is not None:
        m, n, k = case["args"][0].shape[0], case["args"][1].shape[1], case["args"][0].shape[1]
        nb.measure("wgmma + TMA, persistent, your column order",
                   persistent_matmul(m, n, k, nb.spec.sm_count, group=4, order=order), **case)
