"""Check, then time: every kernel is compared with a float64 reference before it is timed.

A notebook opens a `Session`; `session.measure(...)` builds the kernel, validates the inputs
against its buffers, runs it on inputs poisoned with NaN, prints the relative error, then
times it (warm-up, repeats, median). Without a GPU the same call returns the measurement
recorded on a GPU, labelled as recorded, or says plainly that there is none.
"""

from __future__ import annotations

import statistics

import numpy as np
import tvm

from . import baselines, env, kernels, mode, records
from .measurement import Measurement, WrongResult, _check_counts  # noqa: F401 (helpers.bench.Measurement)


# ---------------------------------------------------------------- arguments

def _params(kernel) -> list | None:
    if isinstance(kernel, tvm.runtime.Executable):
        return None
    mod = kernels._module(kernel)
    return list(mod["main"].params)


def _static(size) -> int | None:
    """A buffer dimension's size, or None for a symbolic one (TVM's own kernels, e.g. its attention
    prefill, take any batch and sequence length)."""
    try:
        return int(size)
    except TypeError:
        return None


def check_args(kernel, args) -> None:
    """Compare each array with the PrimFunc's buffer: count, shape, dtype, device."""
    params = _params(kernel)
    if not isinstance(args, (list, tuple)):
        raise TypeError(f"args must be a list of the kernel's arrays, outputs included, got {type(args).__name__}")
    if params is not None and len(args) != len(params):
        raise ValueError(f"the kernel takes {len(params)} arrays ({', '.join(p.name for p in params)}), got {len(args)}")
    for i, a in enumerate(args):
        name = params[i].name if params else f"argument {i}"
        if isinstance(a, tvm.runtime.Tensor):
            if a.device.dlpack_device_type() != tvm.cuda(0).dlpack_device_type():
                raise ValueError(f"array {name} is on {a.device}, not the GPU: make it with "
                                 "tvm.runtime.tensor(x, tvm.cuda(0))")
            shape, dtype = tuple(a.shape), str(a.dtype)
        elif isinstance(a, np.ndarray):
            shape, dtype = a.shape, str(a.dtype)
        else:
            raise TypeError(f"array {name} is a {type(a).__name__}; pass a NumPy array or a tvm.runtime.Tensor")
        if params is None:
            continue
        want_shape = tuple(_static(s) for s in params[i].shape)  # a symbolic size (a Var) takes any
        if len(shape) != len(want_shape) or any(w is not None and w != s for s, w in zip(shape, want_shape)):
            shown = ", ".join(str(w if w is not None else s) for w, s in zip(want_shape, params[i].shape))
            shown = f"({shown},)" if len(want_shape) == 1 else f"({shown})"
            raise ValueError(f"array {name} has shape {shape}, but the kernel's buffer {name} is {shown}")
        if dtype != str(params[i].dtype):
            raise ValueError(f"array {name} has dtype {dtype}, but the kernel's buffer {name} is {params[i].dtype}")


def _to_device(args, dev, poison_index=None):
    out = []
    for i, a in enumerate(args):
        if isinstance(a, tvm.runtime.Tensor):
            out.append(a)
            continue
        host = a
        if i == poison_index:  # never test on leftovers: an unwritten element must show up
            host = np.full_like(a, np.nan) if np.issubdtype(a.dtype, np.floating) else np.full_like(a, -7)
        out.append(tvm.runtime.tensor(host, dev))
    return out


def relative_error(actual, expected) -> float:
    """||actual - expected|| / ||expected|| in float64; NaN anywhere makes it NaN (a failure)."""
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if a.shape != e.shape:
        raise ValueError(f"output shape {a.shape} differs from the reference's {e.shape}")
    denom = np.linalg.norm(e)
    return float(np.linalg.norm(a - e) / (denom if denom else 1.0))


def run(kernel, args, target=None, out: int = -1):
    """Build (if needed), check the arguments, run once on the GPU; return the output as NumPy."""
    check_args(kernel, args)
    dev = env.device()
    ex = kernels.build(kernel, target)
    return _launch_once(ex, dev, args, out)[out].numpy()


def _launch_once(ex, dev, args, out: int) -> list:
    """Copy the arguments to the GPU (the output poisoned), run the kernel once, wait for it;
    return the device arrays, so the caller can read the output or time further runs."""
    dev_args = _to_device(args, dev, poison_index=out % len(args))
    ex.mod["main"](*dev_args)
    dev.sync()
    return dev_args


def time_function(f, dev, args, repeat: int = 20, warmup: int = 2, min_repeat_ms: int = 20,
                  flush_bytes: int = 0) -> list[float]:
    """Milliseconds per call for each of `repeat` timed rounds, after `warmup` untimed calls.

    TVM's time_evaluator times on the device; `min_repeat_ms` makes each round long enough
    that launch jitter averages out. `flush_bytes` > 0: each round is one call, timed after TVM
    copies a buffer of that size (larger than L2), so the call reads its data from DRAM.
    """
    if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat <= 0:
        raise ValueError(f"repeat must be a positive integer, got {repeat!r}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup!r}")
    for _ in range(warmup):
        f(*args)
    dev.sync()
    evaluator = f.time_evaluator if hasattr(f, "time_evaluator") else None
    if evaluator is None:
        raise TypeError("expected a TVM function or module with time_evaluator")
    if flush_bytes:
        res = evaluator("main", dev, number=1, repeat=repeat, min_repeat_ms=0, cache_flush_bytes=int(flush_bytes))(*args)
    else:
        res = evaluator("main", dev, number=1, repeat=repeat, min_repeat_ms=int(min_repeat_ms))(*args)
    return [r * 1e3 for r in res.results]


def _flushed_rounds(ex, dev, dev_args, flush: int):
    """Rounds of flushed calls of a built kernel timed as torch's baselines are
    (`baselines.torch_flushed_rounds`: launched on torch's stream, behind a hold, no launch gap in
    the time); None where torch is not installed (TVM's time_evaluator flushes then, and syncs
    before each call, so its times include the launch)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    return baselines.torch_flushed_rounds(baselines.on_torch_stream(ex.mod["main"], dev, dev_args), flush)


# ---------------------------------------------------------------- the session


class Session:
    """One notebook's measurements: live on a GPU, recorded otherwise."""

    def __init__(self, notebook: str, quiet: bool = False, *, device=None, target=None, run: mode.Mode | None = None):
        """`device` and `target` run the kernels somewhere other than this machine's GPU: the tests
        pass the CPU (`tvm.cpu(0)`) and TVM's LLVM target, so that the check before timing runs,
        and is tested, on machines without a GPU. The numbers are then labelled with the spec
        the session would show (the recorded GPU's). `run`: the mode (recording, a simulated
        architecture...), `helpers.mode.current()` unless given."""
        env.check_notebook(notebook)  # before anything is printed or opened
        self.notebook = notebook
        self.mode = run if run is not None else mode.current()
        self.live = device is not None or env.gpu_available()
        self.device = device if device is not None else (env.device() if self.live else None)
        self.results: list[Measurement] = []
        self._rounds = {}  # baseline name -> a function timing one round of it, in ms
        rec_device = records.recorded_device(notebook)  # the GPU whose records this notebook shows
        if self.live and device is None:
            self.spec = env.local_gpu_spec()
        elif env.simulated_spec():
            self.spec = env.simulated_spec()
        elif rec_device:
            self.spec = env.GpuSpec(**rec_device)
        else:
            self.spec = None
        self.target = target if target is not None else env.make_target()
        self._recorded_meta = self._first_record()
        if not quiet:
            print(env.banner_line(self.spec if self.live else None, self._recorded_meta))

    @property
    def records_gpu(self) -> str:
        """The results folder this session reads records from, its own notebook's or an earlier one's:
        this GPU's when live, else the GPU whose records its notebook shows, so that numbers set side
        by side (a "% of copy", an earlier lesson's kernel) come from one GPU."""
        return records.gpu_slug(self.spec.name) if self.live else records.recorded_gpu(self.notebook)

    def _first_record(self) -> dict | None:
        data = records.load(records.results_path(self.notebook))
        if not data or not data["measurements"]:
            return None
        first = next(iter(data["measurements"].values()))
        return {"gpu": data["gpu"], "date": first.get("date", "?"), "tvm": first.get("tvm", "?")}

    # -- what this GPU can do

    def supports(self, feature: str, instead: str) -> bool:
        """Whether this GPU has `feature` (see `env.FEATURES`); if not, say so in one line with
        what the step runs `instead`, e.g. nb.supports("cp.async", "with synchronous copies")."""
        return env.decide(self.spec, lambda spec: env.lacks(spec, feature), f"this step runs {instead}")

    def fits(self, shared_bytes: int, instead: str) -> bool:
        """Whether a block with `shared_bytes` of shared memory fits this GPU; if not, say so
        in one line with what the step runs `instead`."""
        kernels.check_number("shared_bytes", shared_bytes, " (bytes per block)", zero=True)
        return env.decide(self.spec, lambda spec: env.lacks_shared_memory(spec, shared_bytes),
                          f"this step runs {instead}")

    def can_run(self, kernel, instead: str) -> bool:
        """Whether a kernel made elsewhere (replayed from another GPU's tuning) runs on this GPU;
        if not, say in one line why and what happens `instead` (a clause)."""
        return env.decide(self.spec, lambda spec: kernels.why_not_here(kernel, spec), instead)

    # -- live or recorded

    def _recorded(self, name: str) -> Measurement:
        entry = records.recorded(self.notebook, name)
        if entry is None:
            gpu = self.spec.name if self.spec else records.recorded_gpu(self.notebook)
            m = Measurement(name=name, ms=None, source="missing", gpu=gpu, notebook=self.notebook)
        else:
            m = Measurement.from_record(entry)
        self.results.append(m)
        return m

    def _finish(self, m: Measurement) -> Measurement:
        if self.mode.record:
            m.command = self.mode.record_command
            records.save_measurement(self.notebook, m.to_record(), self.spec.to_dict())
        self.results.append(m)
        return m

    def flush_bytes(self, bytes: float | None, flops: float | None = None) -> int:
        """How many bytes to write between timed calls so that L2 holds none of a kernel's data: 0
        (no flush) unless this session runs on a CUDA GPU and the kernel is memory-bound (below the
        fp32 ridge point) with data that would fit in L2 (under 4x its size). Twice L2, then."""
        spec = self.spec
        if not self.live or bytes is None or spec is None or not getattr(spec, "l2_bytes", None):
            return 0
        if self.device is None or self.device.dlpack_device_type() != tvm.cuda(0).dlpack_device_type():
            return 0
        ridge = spec.peak_fp32_tflops * 1e12 / (spec.dram_gbps * 1e9) if spec.dram_gbps else 10.0
        memory_bound = flops is None or flops / bytes < ridge
        return 2 * spec.l2_bytes if memory_bound and bytes < 4 * spec.l2_bytes else 0

    def _new(self, name, ms, **kw) -> Measurement:
        return Measurement(name=name, ms=ms, source="live", gpu=self.spec.name, date=env.today(),
                           tvm=tvm.__version__, notebook=self.notebook, **kw)

    # -- build: for this GPU, or for the architecture a kernel is written for

    def target_for(self, arch: str | None = None) -> tvm.target.Target:
        """The target a kernel written for `arch` ("sm_80": mma.sync; "sm_90a": wgmma and TMA) is built
        for: this session's where its GPU (or the one the run stands for) runs `arch`'s code, else `arch`."""
        if arch is None:
            return self.target
        return self.target if not arch.endswith("a") and env.runs_arch(self.spec, arch) else env.make_target(arch)

    def runs(self, arch: str | None = None) -> bool:
        """Whether a kernel written for `arch` runs here: live, on a GPU that has `arch`'s instructions."""
        return self.live and (arch is None or env.runs_arch(self.spec, arch))

    def build(self, kernel, arch: str | None = None, tir_pipeline: str = "default"):
        """`helpers.build` for `target_for(arch)`; where the run stands for a GPU it does not have (the
        architecture tests), the kernel's machine code for that GPU too (`kernels.prove_machine_code`)."""
        target = self.target_for(arch)
        target = target if isinstance(target, tvm.target.Target) else env.make_target(target)
        ex = kernels.build(kernel, target, tir_pipeline)
        kernels.prove_machine_code(kernel, ex, target, self.mode, tir_pipeline)
        return ex

    def measure(self, name: str, kernel, args, expected=None, *, flops=None, bytes=None,
                tol: float = 1e-5, repeat: int = 20, out: int = -1, params: dict | None = None,
                baseline: Measurement | None = None, quiet: bool = False, traffic: str | None = None,
                arch: str | None = None, tir_pipeline: str = "default") -> Measurement:
        """Build, check against `expected` (if given), time; or show the recorded result.

        `args` are NumPy arrays for every buffer of the kernel in order, outputs included (an
        output's contents are ignored: it is poisoned with NaN before the checked run).
        `expected` may be a function returning the reference, so that a costly float64
        reference is only computed where the kernel really runs. `baseline` (a live baseline of
        this session, e.g. `cublas_matmul`'s) is timed in rounds alternating with the kernel's,
        so that `m.of(baseline)` is a ratio both timings' drift cannot move. `arch`: the
        architecture the kernel is written for ("sm_90a" for wgmma and TMA, through
        `tir_pipeline="tirx"`): it runs where the GPU has it; elsewhere its machine code for that
        architecture is compiled (the proof that it exists there) and the record is shown.
        """
        kernels.check_number("repeat", repeat)  # a positive integer, NumPy's too; not True
        repeat = int(repeat)
        if traffic not in (None, "requested"):
            raise ValueError(f"traffic is None (bytes = the minimal DRAM traffic) or 'requested', got {traffic!r}")
        check_args(kernel, args)
        _check_counts(flops=flops, bytes=bytes)  # on every machine, not only where the kernel runs
        kernels.check_number("tol", tol, " (the largest relative error accepted)", integer=False, zero=True)
        index = isinstance(out, (int, np.integer)) and not isinstance(out, bool)
        if not index or not -len(args) <= out < len(args):
            raise ValueError(f"out must be the index of the output among the {len(args)} arrays, got {out!r}")
        shape = [list(a.shape) for a in args]
        dtype = str(args[0].dtype)
        ex = self.build(kernel, arch, tir_pipeline)  # on every machine: it still builds
        if not self.runs(arch):
            if arch is not None and not quiet and ex.mod.imports:  # the proof that it exists where it would run
                kernels.device_code(ex.mod.imports[0].inspect_source(), str(self.target_for(arch).attrs["arch"]))
            m = self._recorded(name)
        else:
            dev = self.device
            dev_args = _launch_once(ex, dev, args, out)
            err = None
            if callable(expected):
                expected = expected()
            if expected is not None:
                err = relative_error(dev_args[out].numpy(), expected)
                if not err <= tol:
                    raise WrongResult(f"{name}: relative error {err:.3e} exceeds the tolerance {tol:.0e}: "
                                      "the kernel is wrong, so it is not timed")
            versus = baseline.name if baseline is not None and baseline.name in self._rounds else None
            flush = self.flush_bytes(bytes, flops)
            flushed = _flushed_rounds(ex, dev, dev_args, flush) if flush else None
            rounds = 5 * repeat if flush else repeat  # a flushed round is one call: more of them
            if flushed is not None:  # a round: 10 calls, each alone after a flush, as torch's baselines
                times, base_times, ratio = ([flushed() for _ in range(repeat)], None, None) if versus is None \
                    else baselines.interleaved(flushed, self._rounds[versus], repeat)
            elif versus is None:
                by_tvm = {"flush_bytes": flush} if flush else {}  # TVM's own flush, where torch is not installed
                times, base_times, ratio = time_function(ex.mod, dev, dev_args, repeat=rounds, **by_tvm), None, None
            else:
                time_function(ex.mod, dev, dev_args, repeat=1)  # warm up
                times, base_times, ratio = baselines.interleaved(  # a flushed round: the mean of 10 flushed calls
                    lambda: statistics.mean(time_function(ex.mod, dev, dev_args, repeat=10, warmup=0, flush_bytes=flush))
                    if flush else time_function(ex.mod, dev, dev_args, repeat=1, warmup=0)[0], self._rounds[versus], repeat)
            m = self._finish(self._new(name, statistics.median(times), rel_err=err, flops=flops, bytes=bytes,
                                       shape=shape, dtype=dtype, params=params, versus=versus, ratio=ratio, traffic=traffic,
                                       baseline_ms=statistics.median(base_times) if base_times else None,
                                       ratio_quartiles=baselines.ratio_quartiles(times, base_times) if base_times else None,
                                       l2_flushed=bool(flush)))
        if not quiet:
            print(m)
        return m

    def cublas_matmul(self, M: int, N: int, K: int, dtype: str = "float32", *, transpose_b: bool = False,
                      out_dtype: str | None = None, repeat: int = 20, name: str | None = None,
                      graph: bool = False, quiet: bool = False, arch: str | None = None) -> Measurement:
        """cuBLAS on the same problem, through torch (or cupy), TF32 off; recorded without a GPU.
        `out_dtype`: C's type when it differs from A's and B's (fp16 in, fp32 C). `graph`: time
        rounds replayed from a CUDA graph (torch only), for problems that take less time on the
        GPU than a call takes to dispatch from Python (see `baselines.graph_rounds`). `arch`: the
        architecture of the kernels it is the baseline of ("sm_90a"): where they cannot run, it is
        shown from the record too, beside theirs, rather than timed on this GPU."""
        kernels.check_matmul(M, N, K, dtype=dtype, out_dtype=out_dtype)  # with or without a GPU
        kernels.check_number("repeat", repeat)
        out_dtype = out_dtype if out_dtype != dtype else None
        name = name or f"cuBLAS {dtype} {M}x{N}x{K}" + (f", {out_dtype} C" if out_dtype else "")
        if not self.runs(arch):
            m = self._recorded(name)
        else:
            try:
                call = baselines.cublas_call(M, N, K, dtype, transpose_b, out_dtype)
            except RuntimeError as err:
                call, why = None, str(err)
            else:
                why = "neither torch nor cupy is installed"
            if call is None:
                return self._no_baseline(name, f"{why}, so there is no cuBLAS baseline")
            c_bytes = M * N * np.dtype(out_dtype or dtype).itemsize
            graph = graph and getattr(call[1], "__module__", "").startswith("torch")  # not cupy's
            rounds = baselines.graph_rounds(call[0]) if graph else baselines.event_rounds(*call)
            m = self.baseline(name, rounds, repeat=repeat, flops=2.0 * M * N * K,
                              bytes=float((M * K + K * N) * np.dtype(dtype).itemsize + c_bytes),
                              shape=[M, N, K], dtype=dtype,
                              params={"transpose_b": transpose_b} | ({"out_dtype": out_dtype} if out_dtype else {})
                              | ({"graph": True} if graph else {}))
        if not quiet:
            print(m)
        return m

    def torch_op(self, name: str, fn, arrays, *, bytes: float | None = None, flops: float | None = None,
                 repeat: int = 20, quiet: bool = False) -> Measurement:
        """A torch operation as a kernel's baseline: `fn(torch, *tensors)` on GPU copies of the NumPy
        `arrays` (e.g. `lambda torch, x: torch.softmax(x, -1)`), timed like cuBLAS in `cublas_matmul`
        and kept for interleaving (`measure(baseline=...)`); recorded without a GPU. `bytes`, `flops`:
        the minimal DRAM traffic and the work, counted as for the kernel. An operation torch cannot
        run on this GPU (a RuntimeError: e.g. an attention backend it lacks) is a missing baseline,
        said in one line."""
        if not isinstance(name, str) or not name:  # before anything runs, as Measurement would after
            raise ValueError(f"a measurement's name must be a non-empty string, got {name!r}")
        if not callable(fn):
            raise TypeError(f"fn must be a function of (torch, *tensors), got {type(fn).__name__}")
        if not isinstance(arrays, (list, tuple)) or not arrays or not all(isinstance(a, np.ndarray) for a in arrays):
            raise TypeError(f"arrays must be a non-empty list of NumPy arrays, got {arrays!r:.80}")
        _check_counts(flops=flops, bytes=bytes)
        kernels.check_number("repeat", repeat)
        if not self.live:
            m = self._recorded(name)
        else:
            call = baselines.torch_call(fn, arrays)
            if call is None:
                return self._no_baseline(name, "torch is not installed, so there is no torch baseline")
            flush = self.flush_bytes(bytes, flops)
            try:
                one_round = (baselines.torch_flushed_rounds(call[0], flush) if flush
                             else baselines.event_rounds(*call))
            except RuntimeError as err:
                return self._no_baseline(name, f"torch cannot run it on this GPU ({str(err).splitlines()[0][:80]})")
            m = self.baseline(name, one_round, repeat=repeat, bytes=bytes, flops=flops, l2_flushed=bool(flush),
                              shape=[list(a.shape) for a in arrays], dtype=str(arrays[0].dtype))
        if not quiet:
            print(m)
        return m

    def _no_baseline(self, name: str, why: str) -> Measurement:
        """Say in one line why a baseline cannot be timed on this machine; its missing measurement."""
        print(f"{name}: {why}")
        return Measurement(name=name, ms=None, source="missing", gpu=self.spec.name, notebook=self.notebook)

    def baseline(self, name: str, one_round, *, repeat: int = 20, **kw) -> Measurement:
        """Time a baseline from `one_round()` (ms per call over one timed round): the median of
        `repeat` rounds. The session keeps `one_round`, so that a kernel measured with
        `baseline=` this measurement is timed interleaved with it."""
        if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat <= 0:
            raise ValueError(f"repeat must be a positive integer, got {repeat!r}")
        self._rounds[name] = one_round
        return self._finish(self._new(name, statistics.median(one_round() for _ in range(repeat)), **kw))

    def record(self, name: str, ms: float, **kw) -> Measurement:
        """Keep a live number measured by other means (e.g. torch) beside the kernels'; pass
        `on_cpu=True` for one timed on the host CPU, so its label does not claim the GPU."""
        if not self.live:
            return self._recorded(name)
        return self._finish(self._new(name, ms, **kw))

    def copy_ceiling(self) -> Measurement:
        """The course's one bandwidth yardstick, as notebook 00 measures it: the faster of two copies
        of 2^26 floats (256 MiB each way, far beyond any L2), one float and a float4 per thread, 256
        threads a block. Timed here on a GPU, so that a "% of copy" divides numbers of one run;
        elsewhere 00's records on the GPU whose records this notebook shows (a missing measurement
        when there are none)."""
        names = [f"copy 2^26 floats{suffix}" for suffix in ("", ", float4")]
        if self.live:
            a = np.random.default_rng(0).standard_normal(COPY_FLOATS, dtype=np.float32)
            copies = [self.measure(name, kernels.copy_kernel(COPY_FLOATS, 256, vector), [a, np.empty_like(a)],
                                   lambda: a, bytes=2 * a.nbytes, params={"threads": 256, "vector": vector},
                                   quiet=True) for name, vector in zip(names, (1, 4))]
        else:
            copies = [m for m in recorded_measurements("00_gpu_architecture", self.records_gpu) if m.name in names]
            self.results.extend(copies)  # in this notebook's table, as on a GPU
        copies = [m for m in copies if m.ok]
        if not copies:
            return Measurement(names[1], None, source="missing", notebook="00_gpu_architecture",
                               gpu=self.spec.name if self.spec else records.recorded_gpu(self.notebook))
        return max(copies, key=lambda m: m.gbps)

    def recorded_or_live(self, name: str) -> Measurement | None:
        """The measurement of this name taken in this session, else the recorded one."""
        for m in reversed(self.results):
            if m.name == name:
                return m
        entry = records.recorded(self.notebook, name)
        return Measurement.from_record(entry) if entry else None


#: notebook 00's copy: 64 Mi floats, 256 MiB per array
COPY_FLOATS = 1 << 26


def recorded_measurements(notebook: str, gpu: str | None = None) -> list[Measurement]:
    """Every measurement a notebook recorded on `gpu` (a results folder name; default: the GPU
    whose records it shows), falling back to that GPU's; [] when there are none."""
    env.check_notebook(notebook)  # a misspelt name is not a notebook without records
    data = records.load(records.results_path(notebook, gpu))
    if data is None and gpu is not None:
        data = records.load(records.results_path(notebook))
    return [Measurement.from_record(e) for e in data["measurements"].values()] if data else []


def start(notebook: str) -> Session:
    """Open a notebook's session and print its banner line; the mode (live or recorded, recording,
    a simulated architecture) is read from the environment here, once."""
    return Session(notebook, run=mode.read())
