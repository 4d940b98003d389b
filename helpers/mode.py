"""How this run of the course behaves, read from the environment in one place, once.

A notebook runs live on a GPU or shows the records of one; a maintainer's command may record, stand
for another GPU's architecture (the architecture tests), or move every recorded time (the perturbed
run of `tests/test_recorded_outputs.py`). Those choices come from `COURSE_*` variables, set by the
commands that need them, and nowhere but here are they read: `helpers.start` reads them into one
`Mode`, which its session carries, and the rest of `helpers` asks `current()`.
"""

from __future__ import annotations

import dataclasses
import os

#: The GPU whose records a machine without a GPU shows (another with COURSE_RECORDED_GPU).
DEFAULT_RECORDED_GPU = "nvidia-h100-80gb-hbm3"
#: The notebooks whose records are another GPU's: notebook -> that GPU's results folder. A notebook is
#: here when its kernel changed while only that GPU was lent to re-record it, so its records and the
#: prose that quotes them are that GPU's. Drop its entry once it is re-recorded on the default GPU.
RECORDED_ON: dict[str, str] = {}
#: Set to any word, this makes every recorded time read back up to 15% slower or faster (a fixed
#: factor per measurement, drawn from the word, the notebook and the name; ratios move with it), as
#: a live run on a GPU would print other numbers.
PERTURB_VARIABLE = "COURSE_PERTURB_RECORDS"


@dataclasses.dataclass(frozen=True)
class Mode:
    """One run's choices. Each field names the variable it comes from."""

    record: bool = False  # COURSE_RECORD=1: live measurements replace the committed records
    record_command: str | None = None  # COURSE_RECORD_COMMAND: the command a record names
    recorded_gpu: str = DEFAULT_RECORDED_GPU  # COURSE_RECORDED_GPU: whose records to show
    perturb: str | None = None  # COURSE_PERTURB_RECORDS: the word that moves recorded times
    archs: tuple[str, ...] = ()  # COURSE_ARCH: GPUs a machine without one builds for, e.g. sm_75,sm_80
    build_log: str | None = None  # COURSE_BUILD_LOG: where the architecture tests read builds and fallbacks
    compile_every_build: bool = False  # COURSE_COMPILE_EVERY_BUILD: machine code for every CUDA build
    out: str | None = None  # OUT: the folder a GPU machine's run hands its files back in

    @classmethod
    def from_environ(cls, environ=None) -> "Mode":
        e = os.environ if environ is None else environ
        return cls(record=e.get("COURSE_RECORD") == "1",
                   record_command=e.get("COURSE_RECORD_COMMAND") or None,
                   recorded_gpu=e.get("COURSE_RECORDED_GPU") or DEFAULT_RECORDED_GPU,
                   perturb=e.get(PERTURB_VARIABLE) or None,
                   archs=tuple(a for a in e.get("COURSE_ARCH", "").split(",") if a),
                   build_log=e.get("COURSE_BUILD_LOG") or None,
                   compile_every_build=bool(e.get("COURSE_COMPILE_EVERY_BUILD")),
                   out=e.get("OUT") or None)

    def recorded_gpu_for(self, notebook: str | None) -> str:
        """The GPU whose records `notebook` shows: the one this run asks for (COURSE_RECORDED_GPU), if
        it asks for another than the default; else the notebook's own (RECORDED_ON), else the default."""
        if self.recorded_gpu != DEFAULT_RECORDED_GPU:
            return self.recorded_gpu
        return RECORDED_ON.get(notebook, DEFAULT_RECORDED_GPU)

    @property
    def shows_committed_records(self) -> bool:
        """Whether records read back are the committed ones, unmoved: each notebook's committed GPU's
        (the default, or its own in RECORDED_ON), not another asked for, and not perturbed."""
        return self.recorded_gpu == DEFAULT_RECORDED_GPU and not self.perturb


_current: Mode | None = None


def read() -> Mode:
    """Read the environment (as `helpers.start` does for each notebook) and make it this process's mode."""
    global _current
    _current = Mode.from_environ()
    return _current


def current() -> Mode:
    """This process's mode: the last one read, or the environment's if none was read yet."""
    return _current if _current is not None else read()
