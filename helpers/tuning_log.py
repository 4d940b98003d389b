"""Keeping a MetaSchedule search quiet in a notebook: its log goes to a file, the screen shows one
progress bar.

Left alone, MetaSchedule writes a line for every candidate, every build error and every design
space, from Python loggers, from its C++ side and from its builder and runner worker processes,
and in a notebook it displays a table of its tasks after every round. `helpers.tuning` runs each
search inside `_quiet`, which sends all of that to a log file, and reports progress with
`_Progress`; this module holds those two pieces and the hooks they need.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path

import tvm_ffi

#: The logger MetaSchedule's Python side logs to (its C++ side logs through `_log_func`).
_MS_LOGGER = "tvm.s_tir.meta_schedule"


# ---------------------------------------------------------------- the progress bar


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


# ---------------------------------------------------------------- the log file


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
