"""Check, then time: every kernel is compared with a float64 reference before it is timed.

A notebook opens a `Session`; `session.measure(...)` builds the kernel, validates the inputs
against its buffers, runs it on inputs poisoned with NaN, prints the relative error, then
times it (warm-up, repeats, median). Without a GPU the same call returns the measurement
recorded on a GPU, labelled as recorded, or says plainly that there is none.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics

import numpy as np
import tvm

from . import baselines, env, kernels, records


class WrongResult(AssertionError):
    """A kernel's output differs from the reference by more than the tolerance."""


@dataclasses.dataclass
class Measurement:
    """One kernel's result: time, rate and error, and where it came from."""

    name: str
    ms: float | None
    rel_err: float | None = None
    flops: float | None = None
    bytes: float | None = None
    source: str = "live"  # "live", "recorded" or "missing"
    gpu: str = ""
    date: str = ""
    tvm: str = ""
    notebook: str = ""
    shape: list | None = None
    dtype: str | None = None
    params: dict | None = None
    command: str | None = None
    on_cpu: bool = False  # a CPU baseline timed on the GPU machine's host, not on the GPU
    versus: str | None = None  # the baseline this kernel was timed interleaved with (its name)
    ratio: float | None = None  # median over those rounds of baseline ms / this ms (1.0: as fast)
    baseline_ms: float | None = None  # the baseline's median over those same rounds: what `ratio` divides
    # which bytes `bytes` counts: None, the minimal DRAM traffic (every array once); "requested",
    # what the schedule asks global memory for (03 and 04: caches serve the repeats, so GB/s can
    # pass the DRAM peak). GB/s and intensity say which; a course-wide chart uses `at_minimal_traffic`
    traffic: str | None = None

    def __post_init__(self):
        """Refuse a measurement no kernel can have, whoever makes it (a notebook, `Session.record`, a
        record read back): a time that is negative, zero, NaN or infinite would print as a number and
        make every rate and ratio from it a wrong one. Only a missing measurement has no time."""
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a measurement's name must be a non-empty string, got {self.name!r}")
        if self.source not in ("live", "recorded", "missing"):
            raise ValueError(f"source must be 'live', 'recorded' or 'missing', got {self.source!r}")
        if self.ms is not None or self.source != "missing":
            kernels.check_number("ms", self.ms, " (milliseconds; None only with source='missing')", integer=False)
        _check_counts(flops=self.flops, bytes=self.bytes, ratio=self.ratio, baseline_ms=self.baseline_ms)
        if self.rel_err is not None:
            kernels.check_number("rel_err", self.rel_err, " or None", integer=False, zero=True)
        if self.traffic not in (None, "requested"):
            raise ValueError(f"traffic is None (bytes = the minimal DRAM traffic) or 'requested', got {self.traffic!r}")
        if self.dtype is not None and not _numpy_dtype(self.dtype):
            raise ValueError(f"dtype {self.dtype!r} is not an element type NumPy knows: the course's are "
                             f"{', '.join(kernels.MATMUL_DTYPES)}")

    @property
    def tflops(self) -> float | None:
        return self.flops / (self.ms * 1e-3) / 1e12 if self.flops and self.ms else None

    @property
    def gbps(self) -> float | None:
        return self.bytes / (self.ms * 1e-3) / 1e9 if self.bytes and self.ms else None

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity: FLOP per byte of the traffic `bytes` counts (see `traffic`)."""
        return self.flops / self.bytes if self.flops and self.bytes else None

    def at_minimal_traffic(self) -> "Measurement":
        """This measurement with `bytes` the minimal DRAM traffic (each array read or written once,
        from `shape` and `dtype`), for a chart that puts kernels of several notebooks on one axis."""
        if self.traffic != "requested":
            return self
        if not self.shape or not self.dtype:
            raise ValueError(f"{self.name}: no shape and dtype to count its minimal traffic from")
        size = np.dtype(self.dtype).itemsize
        return dataclasses.replace(self, bytes=float(sum(math.prod(s) for s in self.shape) * size), traffic=None)

    @property
    def ok(self) -> bool:
        return self.source != "missing"

    def of(self, baseline: "Measurement | None") -> float | None:
        """This kernel's speed as a fraction of `baseline`'s (0.9: 90% of it). The median of the
        per-round ratios when the two were timed interleaved (`Session.measure(baseline=...)`),
        which cuBLAS's drift from run to run cannot move; else the ratio of their TFLOP/s, and only
        for the same problem (the same FLOP count): a 512^3 kernel is not a share of a 4096^3 cuBLAS."""
        if baseline is None or not self.ok or not baseline.ok:
            return None
        if self.timed_with(baseline):
            return self.ratio
        if not (self.tflops and baseline.tflops) or self.flops != baseline.flops:
            return None
        return self.tflops / baseline.tflops

    def timed_with(self, baseline: "Measurement | None") -> bool:
        """Whether this kernel was timed in rounds interleaved with `baseline` (so `ratio` is against it)."""
        return bool(self.ok and baseline is not None and self.versus is not None and self.versus == baseline.name
                    and self.ratio)

    @property
    def rounds_baseline_ms(self) -> float | None:
        """The baseline's time in this kernel's interleaved rounds, the time `ratio` divided: recorded
        (`baseline_ms`), or for records older than it worked out as ratio x ms; None if timed alone."""
        if not (self.ok and self.versus and self.ratio):
            return None
        return self.baseline_ms or self.ms * self.ratio

    def baseline_in_rounds(self, baseline: "Measurement") -> "Measurement":
        """`baseline` as it ran in this kernel's own interleaved rounds (`rounds_baseline_ms`);
        `baseline` itself when not timed together. Show this beside the ratio, not the baseline's
        separate timing, which drifts by +-5%."""
        return dataclasses.replace(baseline, ms=self.rounds_baseline_ms) if self.timed_with(baseline) else baseline

    def rate(self) -> str:
        parts = []
        if self.tflops is not None:
            parts.append(f"{self.tflops:,.2f} TFLOP/s")
        if self.gbps is not None and (self.tflops is None or self.gbps > 1):
            parts.append(f"{self.gbps:,.0f} GB/s" + (" requested" if self.traffic == "requested" else ""))
        return ", ".join(parts)

    def label(self) -> str:
        where = f"the CPU of the {self.gpu} machine" if self.on_cpu else self.gpu
        if self.source == "live":
            return f"live on {where}"
        return f"recorded on {where}, {self.date}, TVM {self.tvm}"

    def __str__(self) -> str:
        if self.source == "missing":
            return f"{self.name}: no recorded result on {self.gpu} (run it on a GPU to see it)"
        err = f", rel. error {self.rel_err:.1e}" if self.rel_err is not None else ""
        rate = self.rate()
        line, where = f"{self.name}: {self.ms:.4f} ms{', ' + rate if rate else ''}{err}", f"[{self.label()}]"
        if err and len(line) > 120:  # a long name: the error goes under the line, beside where it comes from
            line, where = line[: -len(err)], f"{err[2:]}  {where}"
        # one line when it fits a slide's 120 characters; else where it comes from goes under it
        return f"{line}  {where}" if len(line) + 2 + len(where) <= 120 else f"{line}\n    {where}"

    def to_record(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("source")
        return d

    @classmethod
    def from_record(cls, entry: dict) -> "Measurement":
        fields = {f.name for f in dataclasses.fields(cls)}
        try:
            return cls(**{k: v for k, v in entry.items() if k in fields}, source="recorded")
        except ValueError as err:  # a record edited by hand: say which one, not only which field
            raise records.RecordError(f"the recorded measurement {entry.get('name')!r} of {entry.get('notebook')} on "
                                      f"{entry.get('gpu')}: {err}; restore its results file with git or re-record "
                                      "it") from None


# ---------------------------------------------------------------- arguments


def _numpy_dtype(name) -> bool:
    """Whether `name` names an element type NumPy knows (what `at_minimal_traffic` sizes bytes by)."""
    try:
        return isinstance(name, str) and np.dtype(name) is not None
    except TypeError:
        return False


def _check_counts(**counts) -> None:
    """Refuse a count that is given but is not a positive finite number (FLOP, bytes, a ratio):
    a rate computed from it would be negative, NaN or infinite."""
    for name, value in counts.items():
        if value is not None:
            kernels.check_number(name, value, " or None", integer=False)


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


def time_function(f, dev, args, repeat: int = 20, warmup: int = 2, min_repeat_ms: int = 20) -> list[float]:
    """Milliseconds per call for each of `repeat` timed rounds, after `warmup` untimed calls.

    TVM's time_evaluator times on the device; `min_repeat_ms` makes each round long enough
    that launch jitter averages out.
    """
    if not isinstance(repeat, int) or repeat <= 0:
        raise ValueError(f"repeat must be a positive integer, got {repeat!r}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup!r}")
    for _ in range(warmup):
        f(*args)
    dev.sync()
    evaluator = f.time_evaluator if hasattr(f, "time_evaluator") else None
    if evaluator is None:
        raise TypeError("expected a TVM function or module with time_evaluator")
    res = evaluator("main", dev, number=1, repeat=repeat, min_repeat_ms=int(min_repeat_ms))(*args)
    return [r * 1e3 for r in res.results]


# ---------------------------------------------------------------- the session


class Session:
    """One notebook's measurements: live on a GPU, recorded otherwise."""

    def __init__(self, notebook: str, quiet: bool = False, *, device=None, target=None):
        """`device` and `target` run the kernels somewhere other than this machine's GPU: the tests
        pass the CPU (`tvm.cpu(0)`) and TVM's LLVM target, so that the check before timing runs,
        and is tested, on machines without a GPU. The numbers are then labelled with the spec
        the session would show (the recorded GPU's)."""
        env.check_notebook(notebook)  # before anything is printed or opened
        self.notebook = notebook
        self.live = device is not None or env.gpu_available()
        self.device = device if device is not None else (env.device() if self.live else None)
        self.results: list[Measurement] = []
        self._rounds = {}  # baseline name -> a function timing one round of it, in ms
        rec_device = records.recorded_device()
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
            gpu = self.spec.name if self.spec else records.recorded_gpu()
            m = Measurement(name=name, ms=None, source="missing", gpu=gpu, notebook=self.notebook)
        else:
            m = Measurement.from_record(entry)
        self.results.append(m)
        return m

    def _finish(self, m: Measurement) -> Measurement:
        if records.recording_enabled():
            m.command = os.environ.get("COURSE_RECORD_COMMAND")
            records.save_measurement(self.notebook, m.to_record(), self.spec.to_dict())
        self.results.append(m)
        return m

    def _new(self, name, ms, **kw) -> Measurement:
        return Measurement(name=name, ms=ms, source="live", gpu=self.spec.name, date=env.today(),
                           tvm=tvm.__version__, notebook=self.notebook, **kw)

    def measure(self, name: str, kernel, args, expected=None, *, flops=None, bytes=None,
                tol: float = 1e-5, repeat: int = 20, out: int = -1, params: dict | None = None,
                baseline: Measurement | None = None, quiet: bool = False, traffic: str | None = None) -> Measurement:
        """Build, check against `expected` (if given), time; or show the recorded result.

        `args` are NumPy arrays for every buffer of the kernel in order, outputs included (an
        output's contents are ignored: it is poisoned with NaN before the checked run).
        `expected` may be a function returning the reference, so that a costly float64
        reference is only computed where the kernel really runs. `baseline` (a live baseline of
        this session, e.g. `cublas_matmul`'s) is timed in rounds alternating with the kernel's,
        so that `m.of(baseline)` is a ratio both timings' drift cannot move.
        """
        if not isinstance(repeat, int) or repeat <= 0:
            raise ValueError(f"repeat must be a positive integer, got {repeat!r}")
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
        if not self.live:
            kernels.build(kernel, self.target)  # prove it still builds (for COURSE_ARCH's GPU, if set)
            m = self._recorded(name)
        else:
            dev = self.device
            ex = kernels.build(kernel, self.target)
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
            if versus is None:
                times, base_times, ratio = time_function(ex.mod, dev, dev_args, repeat=repeat), None, None
            else:
                time_function(ex.mod, dev, dev_args, repeat=1)  # warm up
                times, base_times, ratio = baselines.interleaved(
                    lambda: time_function(ex.mod, dev, dev_args, repeat=1, warmup=0)[0], self._rounds[versus], repeat)
            m = self._finish(self._new(name, statistics.median(times), rel_err=err, flops=flops, bytes=bytes,
                                       shape=shape, dtype=dtype, params=params, versus=versus, ratio=ratio, traffic=traffic,
                                       baseline_ms=statistics.median(base_times) if base_times else None))
        if not quiet:
            print(m)
        return m

    def cublas_matmul(self, M: int, N: int, K: int, dtype: str = "float32", *, transpose_b: bool = False,
                      out_dtype: str | None = None, repeat: int = 20, name: str | None = None,
                      graph: bool = False, quiet: bool = False) -> Measurement:
        """cuBLAS on the same problem, through torch (or cupy), TF32 off; recorded without a GPU.
        `out_dtype`: C's type when it differs from A's and B's (fp16 in, fp32 C). `graph`: time
        rounds replayed from a CUDA graph (torch only), for problems that take less time on the
        GPU than a call takes to dispatch from Python (see `baselines.graph_rounds`)."""
        kernels.check_matmul(M, N, K, dtype=dtype, out_dtype=out_dtype)  # with or without a GPU
        kernels.check_number("repeat", repeat)
        out_dtype = out_dtype if out_dtype != dtype else None
        name = name or f"cuBLAS {dtype} {M}x{N}x{K}" + (f", {out_dtype} C" if out_dtype else "")
        if not self.live:
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
            try:
                one_round = baselines.event_rounds(*call)
            except RuntimeError as err:
                return self._no_baseline(name, f"torch cannot run it on this GPU ({str(err).splitlines()[0][:80]})")
            m = self.baseline(name, one_round, repeat=repeat, bytes=bytes, flops=flops,
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
        if not isinstance(repeat, int) or repeat <= 0:
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
        elsewhere 00's records (a missing measurement when there are none)."""
        names = [f"copy 2^26 floats{suffix}" for suffix in ("", ", float4")]
        if self.live:
            a = np.random.default_rng(0).standard_normal(COPY_FLOATS, dtype=np.float32)
            copies = [self.measure(name, kernels.copy_kernel(COPY_FLOATS, 256, vector), [a, np.empty_like(a)],
                                   lambda: a, bytes=2 * a.nbytes, params={"threads": 256, "vector": vector},
                                   quiet=True) for name, vector in zip(names, (1, 4))]
        else:
            copies = [m for m in recorded_measurements("00_gpu_architecture") if m.name in names]
            self.results.extend(copies)  # in this notebook's table, as on a GPU
        copies = [m for m in copies if m.ok]
        if not copies:
            return Measurement(names[1], None, source="missing", notebook="00_gpu_architecture",
                               gpu=self.spec.name if self.spec else records.recorded_gpu())
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
    """Every measurement a notebook recorded on `gpu` (a results folder name; default: the
    recorded GPU), falling back to the recorded GPU's; [] when there are none."""
    env.check_notebook(notebook)  # a misspelt name is not a notebook without records
    data = records.load(records.results_path(notebook, gpu))
    if data is None and gpu is not None:
        data = records.load(records.results_path(notebook))
    return [Measurement.from_record(e) for e in data["measurements"].values()] if data else []


def start(notebook: str) -> Session:
    """Open a notebook's session and print its banner line."""
    return Session(notebook)
