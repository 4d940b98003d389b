"""A study's command line and its log: what every experiment script runs through.

Each script is a set of *studies*, named by its first argument:

    python gpu/experiments/05_tensor_cores.py pipeline          # on a GPU: build, check, time
    python gpu/experiments/05_tensor_cores.py pipeline --dry    # anywhere: only build every variant

A live run also writes everything it prints to `results/<script>.<study>.txt` beside this file
(to `$OUT/` instead when `$OUT` is set, as on the project's GPU machine), headed by the GPU, the
date, TVM's version and the command, so a committed result always says how to make it again. The
tables it prints through `table` go, as data, to `results/<script>.<study>.json` beside the log:
what the notebooks show (`helpers.experiment_table`) is read from there, never parsed back from text.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import importlib.util
import json
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import tvm

import helpers

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def output_dir(default: Path = RESULTS) -> Path:
    """Where a study writes what it makes: `$OUT` when set (the project's GPU machine), else `default`.
    The one place the experiments ask for it, read with the course's other settings (helpers.mode)."""
    return Path(helpers.mode.current().out or default)


@dataclasses.dataclass
class Study:
    """One study of a script: `run(args)` prints its results and returns the exit status."""

    run: Callable[[argparse.Namespace], int]
    help: str
    dry: bool = True  # it has --dry: build every variant for sm_90, no GPU needed
    needs: tuple[str, ...] = ("torch",)  # what a live run needs besides a GPU: "torch", "cupy", "ncu"
    arguments: tuple = ()  # further options, as (flags, argparse keywords) pairs
    logged: bool = True  # False for a step another study runs under ncu: its output is that study's


def missing(needs: tuple[str, ...]) -> list[str]:
    """Which of a GPU and `needs` this machine lacks."""
    lacking = [] if helpers.gpu_available() else ["a GPU"]
    for need in needs:
        found = shutil.which(need) if need == "ncu" else importlib.util.find_spec(need)
        if not found:
            lacking.append("Nsight Compute (ncu)" if need == "ncu" else need)
    return lacking


class _Tee:
    """A text stream that writes to two."""

    def __init__(self, first, second):
        self.first, self.second = first, second

    def write(self, text):
        self.second.write(text)
        return self.first.write(text)

    def flush(self):
        self.first.flush()
        self.second.flush()


_tables: list[dict] | None = None  # the tables the running study has printed, while a log is open


def table(rows, title: str | None = None) -> None:
    """Print `rows` (the header row first) as an aligned text table under the line `title`, and,
    while a study's log is open, keep them for its JSON: {"title", "header", "rows"}."""
    rows = [[str(c) for c in row] for row in rows]
    if title is not None:
        print(title)
    print(helpers.text_table(rows))
    if _tables is not None:
        _tables.append({"title": title, "header": rows[0], "rows": rows[1:]})


def write_tables(path: Path, header: str, tables: list[dict]) -> None:
    """The JSON beside a log: its header line (GPU, date, TVM, command) and the tables it printed."""
    path.write_text(json.dumps({"header": header, "tables": tables}, indent=1) + "\n")


@contextlib.contextmanager
def logged(path: Path, command: str):
    """Copy stdout and stderr into `path`, under a header line saying where and how they were made;
    the tables printed through `table` go to the same name with .json."""
    global _tables
    now = datetime.datetime.now(datetime.timezone.utc)
    header = f"{helpers.local_gpu_spec().name}, {now:%Y-%m-%d}, apache-tvm {tvm.__version__}; " \
             f"run {now:%H:%M} UTC: {command}"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as log:
        out, err = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Tee(out, log), _Tee(err, log)
        _tables = []
        try:
            print(f"# {header}", flush=True)
            yield
        finally:
            sys.stdout, sys.stderr = out, err
            if _tables:
                write_tables(path.with_suffix(".json"), header, _tables)
            _tables = None
            print(f"(output written to {path})", file=sys.stderr)


def cli(script: str, doc: str, studies: dict[str, Study], argv=None) -> int:
    """Parse `STUDY [options]`, check that the machine can run it, run it (a live run logged)."""
    name = Path(script).name
    ap = argparse.ArgumentParser(prog=f"python gpu/experiments/{name}", description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="study", required=True, metavar="STUDY")
    for study_name, study in studies.items():
        p = sub.add_parser(study_name, help=study.help, description=study.help)
        if study.dry:
            p.add_argument("--dry", action="store_true", help="only build every variant for sm_90 (no GPU needed)")
        for flags, keywords in study.arguments:
            p.add_argument(*flags, **keywords)
    args = ap.parse_args(argv)
    study = studies[args.study]
    if getattr(args, "dry", False):
        return study.run(args)
    lacking = missing(study.needs)
    if lacking:
        print(f"{name} {args.study} needs {' and '.join(lacking)}, which this machine lacks"
              + (" (--dry only builds its variants)" if study.dry else ""), file=sys.stderr)
        return 2
    if not study.logged:
        return study.run(args)
    command = shlex.join(["python3", f"gpu/experiments/{name}", *(argv if argv is not None else sys.argv[1:])])
    with logged(output_dir() / f"{Path(name).stem}.{args.study}.txt", command):
        return study.run(args)


def one_of(allowed, described: str | None = None) -> Callable[[str], str]:
    """An argparse `type` that accepts the names in `allowed` (argparse's own `choices` refuses an
    empty list for nargs="*" on Python 3.11)."""
    def check(text: str) -> str:
        if text not in allowed:
            raise argparse.ArgumentTypeError(f"{text!r} is none of {described or ', '.join(allowed)}")
        return text
    return check


def error_line(err: Exception, width: int = 150) -> str:
    """The last line of an exception's message (TVM's carry a long backtrace before it)."""
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[-1][:width] if text else ''}"
