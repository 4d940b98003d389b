"""Recorded GPU measurements: JSON files under notebooks/results/<gpu>/<notebook>.json.

A student's run never rewrites them: recording happens only in the mode the command that
refreshes the records on a GPU sets (COURSE_RECORD=1, read by `helpers.mode`). Without a GPU the
notebooks read them back and label every number as recorded. The format is documented in
notebooks/results/README.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from . import mode
from .mode import DEFAULT_RECORDED_GPU, PERTURB_VARIABLE  # noqa: F401 (where the records' readers look)

RESULTS_DIR = Path(__file__).resolve().parent.parent / "notebooks" / "results"

FORMAT_VERSION = 1


class RecordError(ValueError):
    """A results file that cannot be read as the course's format."""


def gpu_slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3' (a folder name)."""
    if not isinstance(name, str):
        raise TypeError(f"a GPU's name is a string, got {name!r}")
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if not slug:
        raise ValueError(f"cannot make a folder name from the GPU name {name!r}")
    return slug


def recording_enabled() -> bool:
    """Only the command that refreshes the committed records sets COURSE_RECORD=1."""
    return mode.current().record


def recorded_gpu(notebook: str | None = None) -> str:
    """The results folder whose records `notebook` shows (see `mode.Mode.recorded_gpu_for`): the
    default GPU's, a notebook's own in `mode.RECORDED_ON`, or the one COURSE_RECORDED_GPU names."""
    return mode.current().recorded_gpu_for(notebook)


def shows_committed_records(live: bool) -> bool:
    """Whether the numbers a notebook prints here are its committed records unchanged (the default
    GPU's, or its own GPU's in `mode.RECORDED_ON`): no live GPU, no other GPU asked for, no
    perturbation. Only then can a cell whose output is computed from measurements (tagged
    `recorded-output`) match its committed output."""
    return not live and mode.current().shows_committed_records


def _perturb(data: dict, notebook: str, word: str) -> dict:
    """Every measurement's time times a factor in [0.85, 1.15] fixed by (word, notebook, name)."""
    for name, entry in data["measurements"].items():
        digest = hashlib.sha256(f"{word}/{notebook}/{name}".encode()).digest()
        factor = 0.85 + 0.3 * int.from_bytes(digest[:4], "big") / 0xFFFFFFFF
        if entry.get("ms"):
            entry["ms"] *= factor
        if entry.get("ratio"):  # baseline ms / this ms
            entry["ratio"] /= factor
        if entry.get("ratio_quartiles"):
            entry["ratio_quartiles"] = [q / factor for q in entry["ratio_quartiles"]]
    return data


def results_path(notebook: str, gpu: str | None = None, root: Path | None = None) -> Path:
    return Path(root or RESULTS_DIR) / (gpu or recorded_gpu(notebook)) / f"{notebook}.json"


def load(path: Path) -> dict | None:
    """Read one results file. None when it does not exist; RecordError when it is corrupt."""
    path = Path(path)
    if not path.exists():
        return None
    if not path.is_file():
        raise RecordError(f"{path.name} in {path.parent.name}/ is a folder, not a results file")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RecordError(f"results file {path.name} in {path.parent.name}/ is not valid JSON ({err}); "
                          "restore it with git or re-record it on a GPU") from None
    missing = [k for k in ("gpu", "measurements") if k not in data] if isinstance(data, dict) else ["gpu", "measurements"]
    if missing or not isinstance(data.get("measurements"), dict):
        raise RecordError(f"results file {path.name} in {path.parent.name}/ lacks {missing or ['a measurements table']}: "
                          "it is not a course results file")
    if not all(isinstance(entry, dict) for entry in data["measurements"].values()):
        raise RecordError(f"results file {path.name} in {path.parent.name}/ has a measurement that is not a table "
                          "of fields: it is not a course results file")
    word = mode.current().perturb
    return _perturb(data, path.stem, word) if word else data


def save_measurement(notebook: str, entry: dict, device: dict, root: Path | None = None) -> Path:
    """Add (or replace) one measurement in the GPU's file for `notebook`."""
    if mode.current().perturb:
        raise RuntimeError(f"{PERTURB_VARIABLE} is set: the records read back are perturbed on purpose, "
                           "so none is written (unset it to record)")
    path = results_path(notebook, gpu_slug(device["name"]), root)
    data = load(path) or {}
    data.update(
        format=FORMAT_VERSION,
        notebook=notebook,
        gpu=device["name"],
        device=device,
    )
    data.setdefault("measurements", {})[entry["name"]] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_whole(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path


def _write_whole(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside `path`, then rename it onto `path` (os.replace, atomic
    on one file system): a run stopped mid-write (killed, out of disk) leaves the old records whole,
    never half a JSON file, and no temporary file behind."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def recorded(notebook: str, name: str, root: Path | None = None) -> dict | None:
    """One recorded measurement, or None when there is none."""
    data = load(results_path(notebook, root=root))
    if data is None:
        return None
    return data["measurements"].get(name)


def recorded_device(notebook: str | None = None, root: Path | None = None) -> dict | None:
    """The attributes of the GPU whose records `notebook` shows (from any of its results files), or None."""
    folder = Path(root or RESULTS_DIR) / recorded_gpu(notebook)
    for path in sorted(folder.glob("*.json")):
        data = load(path)
        if data and data.get("device"):
            return data["device"]
    return None


EXPERIMENTS_DIR = Path(__file__).resolve().parent.parent / "gpu" / "experiments" / "results"


def experiment_table(log: str, title: str) -> tuple[str, str, list[list[str]]]:
    """A table a committed experiment printed, from the data its study wrote beside the log:
    gpu/experiments/results/<log>.json. Returns the log's header line (GPU, date, TVM and the
    command that made it), the line naming the table and the table's rows, its header row first.
    The table is the first whose title contains `title`, or whose header row does (as the log's
    text lays it out: that row is then the line naming it). The notebooks show profiles this way:
    Nsight Compute cannot run in them."""
    path = EXPERIMENTS_DIR / f"{log}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no experiment tables {path.name} in {EXPERIMENTS_DIR}")
    data = json.loads(path.read_text())
    for table in data["tables"]:
        rows = [table["header"], *table["rows"]]
        widths = [max(len(row[i]) for row in rows) for i in range(len(table["header"]))]
        header = "  ".join(c.ljust(w) for c, w in zip(table["header"], widths)).rstrip()
        for named in (table["title"] or "", header):
            if title in named:
                return data["header"], named, rows
    raise ValueError(f"{path.name} has no table whose title or header contains {title!r}")
