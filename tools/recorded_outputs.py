"""Cells whose output is computed from measurements, checked only where it can hold.

nbval compares a cell tagged `nbval-check-output` with its committed output on every machine, so
such a cell must print nothing measured: on a GPU the numbers are live, and `pytest` there must
pass too. A table or chart computed from measurements (06's summaries, a "% of cuBLAS" table)
still deserves checking, because a wrong formula shows in it: tag its cell `recorded-output`.
This pytest plugin (loaded by the repository's conftest.py) compares such a cell, text and
charts, only where the notebook shows the committed records unchanged (no GPU, its committed
GPU's records: the default's, or its own in `helpers.mode.RECORDED_ON`; no perturbation:
`records.shows_committed_records`); elsewhere it runs unchecked.

After the records change, rewrite those outputs from them, on a machine without a GPU:

    python -m tools.run_notebooks --recorded-outputs notebooks/06_metaschedule_tuning.ipynb
"""

from __future__ import annotations

import base64
import io

import pytest

TAG = "recorded-output"

#: How far a chart may drift from its committed image (mean absolute difference of its pixels,
#: 0 to 1) before it counts as another chart: the same numbers drawn twice differ by nothing,
#: a moved bar or label by far more than this.
IMAGE_TOLERANCE = 0.002


def is_recorded_output(cell) -> bool:
    return cell.get("cell_type") == "code" and TAG in cell.get("metadata", {}).get("tags", [])


def _compared_here() -> bool:
    from helpers import env, records

    return records.shows_committed_records(env.gpu_available())


def pytest_collection_modifyitems(config, items):
    """Check a `recorded-output` cell's output where the records are shown unchanged, else not."""
    cells = [item for item in items if is_recorded_output(getattr(item, "cell", {}) or {})]
    if not cells:
        return
    compare = _compared_here()
    for item in cells:
        if "nbval-check-output" in item.cell.metadata.get("tags", []):
            raise pytest.UsageError(f"{item.nodeid}: a cell is either `nbval-check-output` (the same everywhere) "
                                    f"or `{TAG}` (computed from measurements), not both")
        item.options["check"] = compare
        item.compare_images = compare


def _images(outputs) -> list:
    import matplotlib.image

    return [matplotlib.image.imread(io.BytesIO(base64.b64decode(o["data"]["image/png"])), format="png")
            for o in outputs if "image/png" in o.get("data", {})]


def image_difference(test_outputs, committed_outputs) -> str | None:
    """Why the charts in two cell outputs differ (count, size, pixels), or None when they match."""
    new, old = _images(test_outputs), _images(committed_outputs)
    if len(new) != len(old):
        return f"the cell draws {len(new)} chart(s), its committed output holds {len(old)}"
    for i, (a, b) in enumerate(zip(new, old)):
        if a.shape != b.shape:
            return f"chart {i + 1} is {a.shape[1]}x{a.shape[0]} px, the committed one {b.shape[1]}x{b.shape[0]} px"
        diff = float(abs(a.astype("float64") - b.astype("float64")).mean())
        if diff > IMAGE_TOLERANCE:
            return f"chart {i + 1} differs from the committed one (mean pixel difference {diff:.4f})"
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """nbval skips images; a `recorded-output` chart must also be the chart its records give."""
    result = yield
    if getattr(item, "compare_images", False) and item.test_outputs is not None:
        why = image_difference(item.test_outputs, item.cell.outputs)
        if why:
            raise AssertionError(f"{item.nodeid}: {why}. If the records changed, rewrite the outputs: "
                                 f"python -m tools.run_notebooks --recorded-outputs {item.fspath.basename}")
    return result
