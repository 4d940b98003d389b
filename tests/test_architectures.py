"""Every kernel of every notebook builds for every GPU architecture the course supports.

Each notebook runs top to bottom with COURSE_ARCH set, as it would on each architecture's
representative GPU (a T4 for sm_75, an A100 for sm_80, an RTX 3090 for sm_86, an L4 for sm_89,
an H100 for sm_90): it makes its choices from the GPU's limits (`nb.supports`, `nb.fits`,
`nb.can_run`), and every kernel it would run is compiled to machine code for the architecture
with NVRTC, as TVM does on a GPU, so ptxas rejects any instruction the architecture lacks. Where
a step cannot exist on an architecture, the notebook must take its documented fallback, no more
and no fewer: FALLBACKS below is that documentation, and the test checks it.

Slow (minutes): `pytest -m "not architectures"` skips it.
"""

import json
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

import helpers

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))
ARCHS = list(helpers.env.REPRESENTATIVE)  # sm_75, sm_80, sm_86, sm_89, sm_90

#: One run of a notebook covers the architectures on which its choices agree: what a T4 lacks
#: (cp.async, 64 KB of shared memory per block) sets sm_75 apart, the 99 KB of sm_86 and sm_89 set
#: them apart from sm_80 and sm_90. Each run compiles every kernel for every architecture of its
#: group and checks every choice for each of them: a choice that differs within a group fails the
#: test, which then says to split the group. Notebooks 00-03 choose nothing by the GPU: one run.
GROUPS = [("sm_75",), ("sm_80", "sm_90"), ("sm_86", "sm_89")]
#: Notebook 07's kernels exist for one target, sm_90a, and are built for it on every machine: its
#: runs split Hopper from the GPUs that lack wgmma and TMA, and check the sm_90a build instead.
ONE_TARGET = {"07_hopper_wgmma_tma": "sm_90a", "08_hopper_persistent_kernel": "sm_90a", "11_flash_attention_hopper": "sm_90a"}
HOPPER_GROUPS = [("sm_75", "sm_80", "sm_86", "sm_89"), ("sm_90",)]
#: Notebook 10 runs its mma.sync kernels from sm_80 on (80 KB of shared memory a block, which every
#: one of them has): a T4 builds them for sm_80 and shows the records.
ATTENTION_GROUPS = [("sm_75",), ("sm_80", "sm_86", "sm_89", "sm_90")]
RUNS = [(nb, list(group)) for nb in NOTEBOOKS
        for group in ([ARCHS] if nb.stem < "04" else HOPPER_GROUPS if nb.stem in ONE_TARGET
                      else ATTENTION_GROUPS if nb.stem == "10_flash_attention" else GROUPS)]

CP_ASYNC = "cp.async needs compute capability 8.0"  # T4: synchronous copies, or 06's recorded results
TWO_STAGES = "needs 108 KB of shared memory per block"  # 05's 2-stage k64 pipeline: a shorter k tile
THREE_STAGES = "needs 162 KB of shared memory per block"  # 05's 3-stage pipelines: shorter k tile, smaller block
TUNED_TILES = "its blocks need more than"  # 06's fp16 WMMA template tuned on the H100: its recorded result
NO_WGMMA = "wgmma + TMA needs compute capability 9.0"  # 07 on pre-Hopper GPUs: built, results recorded
NO_MMA_SYNC = "ldmatrix + mma.sync m16n8k16 needs compute capability 8.0"  # 10 on a T4: built for sm_80

#: (notebook, arch) -> the fallbacks it takes there (a distinctive part of each one-line reason);
#: every other pair runs every step as written.
FALLBACKS = {
    ("04_matmul_shared_blocking", "sm_75"): {CP_ASYNC},
    ("05_tensor_core_tensorization", "sm_75"): {CP_ASYNC, TWO_STAGES, THREE_STAGES},
    ("05_tensor_core_tensorization", "sm_86"): {TWO_STAGES, THREE_STAGES},
    ("05_tensor_core_tensorization", "sm_89"): {TWO_STAGES, THREE_STAGES},
    ("06_metaschedule_tuning", "sm_75"): {CP_ASYNC},  # every H100 kernel but the fp32 template uses cp.async
    ("06_metaschedule_tuning", "sm_86"): {TUNED_TILES},
    ("06_metaschedule_tuning", "sm_89"): {TUNED_TILES},
    ("07_hopper_wgmma_tma", "sm_75"): {NO_WGMMA},  # one run for sm_75, sm_80, sm_86 and sm_89
    ("08_hopper_persistent_kernel", "sm_75"): {NO_WGMMA},  # the same for 07's persistent sequel
    ("10_flash_attention", "sm_75"): {NO_MMA_SYNC},
    ("11_flash_attention_hopper", "sm_75"): {NO_WGMMA},  # one run for sm_75, sm_80, sm_86 and sm_89
    ("12_decoding", "sm_75"): {NO_MMA_SYNC},  # section 7's tensor-core kernels: built for sm_80, records shown
}

pytestmark = [pytest.mark.architectures,
              pytest.mark.skipif(helpers.gpu_available(), reason="a GPU is here: COURSE_ARCH applies without one")]


def _execute(notebook: Path, archs: list[str], log: Path, monkeypatch) -> str | None:
    """Run the notebook as on `archs`; the error of the first failing cell, or None."""
    monkeypatch.setenv("COURSE_ARCH", ",".join(archs))
    monkeypatch.setenv("COURSE_BUILD_LOG", str(log))
    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(nb, timeout=1200, startup_timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(notebook.parent)}})
    try:
        client.execute()
    except CellExecutionError as err:
        return str(err).strip().splitlines()[-1]
    return None


def check_every_kernel_builds(notebook, archs, tmp_path, monkeypatch):
    log = tmp_path / "builds.jsonl"
    error = _execute(notebook, archs, log, monkeypatch)
    events = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    failed = [f"{e['kernel']} ({e['arch']})" for e in events if e.get("ok") is False]
    assert error is None and not failed, (
        f"{notebook.stem} on {'+'.join(archs)}: {error or 'a kernel failed'}; kernels that do not compile: {failed}")
    diverged = [e for e in events if "diverges" in e]
    assert not diverged, (f"{notebook.stem}: the run for {'+'.join(archs)} chooses differently on "
                          f"{diverged[0]['diverges']} ({diverged[0]['reason']}): give them runs of their own (GROUPS)")
    for arch in [ONE_TARGET[notebook.stem]] if notebook.stem in ONE_TARGET else archs:
        assert any(e.get("arch") == arch for e in events), f"{notebook.stem} built no kernel for {arch}"
    taken = {e["fallback"] for e in events if "fallback" in e}
    expected = FALLBACKS.get((notebook.stem, archs[0]), set())
    missing = {f for f in expected if not any(f in t for t in taken)}
    extra = {t for t in taken if not any(f in t for f in expected)}
    assert not missing and not extra, (
        f"{notebook.stem} on {'+'.join(archs)}: expected the fallbacks {sorted(expected)}, took {sorted(taken)}")


# One test class per notebook, so that pytest-xdist (--dist loadscope) spreads the notebooks over
# the cores while each notebook's runs stay on one.
def _notebook_class(notebook: Path) -> type:
    runs = [archs for nb, archs in RUNS if nb == notebook]

    @pytest.mark.parametrize("archs", runs, ids=["+".join(a) for a in runs])
    def test_every_kernel_builds(self, archs, tmp_path, monkeypatch):
        check_every_kernel_builds(notebook, archs, tmp_path, monkeypatch)

    return type(f"TestNotebook{notebook.stem[:2]}", (), {"test_every_kernel_builds": test_every_kernel_builds})


for _notebook in NOTEBOOKS:
    globals()[f"TestNotebook{_notebook.stem[:2]}"] = _notebook_class(_notebook)
