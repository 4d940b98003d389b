"""What one timing is: a kernel's (or a baseline's) time, rate and error, and where it came from.

`Session.measure` makes one on a GPU; the records hold them as JSON (`to_record`, `from_record`); the
tables and charts read them. A measurement refuses impossible values when it is made (a negative or
NaN time, a count that is not a positive number), so nothing downstream divides by them.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from . import kernels, records


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
    # the lower and upper quartiles of those per-round ratios: "ahead" only where the lower is above 1
    ratio_quartiles: list | None = None
    l2_flushed: bool = False  # each call timed after L2 was flushed (its data would fit in L2)
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
        if self.ratio_quartiles is not None:
            q = self.ratio_quartiles
            if not isinstance(q, (list, tuple)) or len(q) != 2 or not self.ratio:
                raise ValueError(f"ratio_quartiles is [lower, upper] of the per-round ratios, with a ratio, got {q!r}")
            _check_counts(ratio_quartiles=q[0], upper_quartile=q[1])
            if not q[0] <= q[1]:
                raise ValueError(f"ratio_quartiles {q!r}: the lower quartile is above the upper")
        if self.rel_err is not None:
            kernels.check_number("rel_err", self.rel_err, " or None", integer=False, zero=True)
        if self.traffic not in (None, "requested"):
            raise ValueError(f"traffic is None (bytes = the minimal DRAM traffic) or 'requested', got {self.traffic!r}")
        if self.dtype is not None and not _numpy_dtype(self.dtype):
            raise ValueError(f"dtype {self.dtype!r} is not an element type NumPy knows: the course's are "
                             f"{', '.join(kernels.MATMUL_DTYPES)}")

    def ratio_text(self, unit: str = "") -> str:
        """The median of the per-round ratios and, where the record keeps them, their quartiles:
        "1.03x [1.02-1.04]" with unit "x". A record from before quartiles were kept shows none."""
        q = self.ratio_quartiles
        return f"{self.ratio:.2f}{unit}" + (f" [{q[0]:.2f}-{q[1]:.2f}]" if q else "")

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

    def standing(self, baseline: "Measurement | None") -> str | None:
        """How this kernel stands against `baseline`, from the quartiles of the per-round ratios:
        "ahead of" only where even the lower quartile is above 1, "behind" where the upper is below 1,
        else "level with" (the rounds disagree). None when they were not timed together with quartiles."""
        if not self.timed_with(baseline) or not self.ratio_quartiles:
            return None
        low, high = self.ratio_quartiles
        return "ahead of" if low > 1 else "behind" if high < 1 else "level with"

    def spread(self) -> str:
        """The per-round ratios' quartiles as percentages, " [98-104%]" ("" when not recorded)."""
        if not self.ratio_quartiles:
            return ""
        low, high = self.ratio_quartiles
        return f" [{low * 100:.0f}-{high:.0%}]"

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
