"""The one way lessons build on each other: a notebook's cells tagged `export`, imported as
`helpers.lessons.<topic>`. Every lesson's exports import on their own, without a GPU, print nothing and
measure nothing; a later notebook names what it takes; a wrong lesson or name is refused by name."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import helpers
from helpers import lessons

EXPORTING = sorted(p.stem for p in lessons.NOTEBOOKS.glob("[0-9][0-9]_*.ipynb") if lessons.exported_cells(p.stem))


def test_the_lessons_that_others_build_on_export_their_code():
    assert {"03_matmul_local_blocking", "04_matmul_shared_blocking", "07_hopper_wgmma_tma",
            "08_hopper_persistent_kernel", "09_reductions", "10_flash_attention",
            "11_flash_attention_hopper"} <= set(EXPORTING)


@pytest.mark.parametrize("notebook", EXPORTING)
def test_exported_cells_define_and_never_measure(notebook):
    """An exported cell holds imports, constants, functions and macros: no session, no measurement,
    no output (it runs again wherever a later lesson imports it)."""
    cells = [c for c in json.loads((lessons.NOTEBOOKS / f"{notebook}.ipynb").read_text())["cells"]
             if lessons.EXPORT in c.get("metadata", {}).get("tags", [])]
    for cell in cells:
        source = "".join(cell["source"])
        names = {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}
        assert "nb" not in names, f"{notebook}: an exported cell uses the session `nb`:\n{source[:200]}"
        assert not cell.get("outputs"), f"{notebook}: an exported cell prints:\n{source[:200]}"


@pytest.mark.parametrize("notebook", EXPORTING)
def test_each_lesson_imports_on_its_own(notebook):
    """In a fresh interpreter, so no earlier import hides a missing one; nothing printed."""
    topic = notebook.split("_", 1)[1]
    run = subprocess.run([sys.executable, "-c", f"import helpers.lessons.{topic}"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout == "", run.stdout


def test_a_later_lesson_says_what_it_takes():
    """08 and 11 import named objects from 07 and 10, and those are the very objects 07 and 10 define."""
    nb08, nb11 = lessons.lesson("08_hopper_persistent_kernel"), lessons.lesson("11_flash_attention_hopper")
    nb07, nb10 = lessons.lesson("07_hopper_wgmma_tma"), lessons.lesson("10_flash_attention")
    assert nb08.hopper_matmul is nb07.hopper_matmul and nb08.load_stage is nb07.load_stage
    assert nb11.online_softmax is nb10.online_softmax and nb11.LOG2E == nb10.LOG2E


def test_unknown_lessons_and_names_are_refused_by_name():
    with pytest.raises(ModuleNotFoundError, match="no lesson named 'flash_atention'.*flash_attention"):
        __import__("helpers.lessons.flash_atention")
    with pytest.raises(ImportError, match="vector_add exports no code: tag the cells"):
        __import__("helpers.lessons.vector_add")
    with pytest.raises(ImportError, match="cannot import name 'BR'"):
        exec("from helpers.lessons.flash_attention import BR", {})
    with pytest.raises(ValueError, match="no notebook named '10_flash_attention.ipynb'"):
        helpers.lessons.lesson("10_flash_attention.ipynb")


def test_the_attention_study_builds_every_kernel_the_notebooks_define(monkeypatch):
    """gpu/experiments/10_attention.py times and profiles notebooks 10 and 11's kernels by name: a lesson that
    renames or moves one must not leave the study calling what is gone (it runs only on a GPU machine)."""
    import importlib.util

    study_dir = Path(__file__).resolve().parent.parent / "gpu" / "experiments"
    monkeypatch.syspath_prepend(str(study_dir))
    spec = importlib.util.spec_from_file_location("attention_study", study_dir / "10_attention.py")
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    kernels = study.lesson_kernels(132)
    assert set(kernels) >= {"mma.sync", "wgmma", "wgmma persistent"}
    for name, (make, _arch) in kernels.items():
        assert make(16, 1024, 128, False).__class__.__name__ == "PrimFunc", name


@pytest.mark.parametrize("script, make", [
    ("q_double", lambda m: m.one_q_module().persistent_flash_attention(512, 1024, 64, False, 132)),
    ("decode_prefetch", lambda m: m.prefetching(2)(32, 32, 8, 128, 16387, 512, 1, 8192)),
])
def test_the_studies_that_edit_a_lessons_code_still_find_what_they_edit(script, make, monkeypatch):
    """Some studies time a variant made by editing the lesson's source (each edit must find its text once): a
    lesson that changes those lines must fail here, on the CPU, not on the GPU machine."""
    import importlib

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent / "gpu" / "experiments"))
    assert make(importlib.import_module(script)).__class__.__name__ == "PrimFunc"



def test_the_relay_study_says_the_walk_has_no_item_end_to_restart_at(monkeypatch):
    """relay_items (the relay restarted every item) edits the walk as it was before next_item_tile: with
    the stream in the lesson there is no item's end to restart at, and it says which commit to run it
    at, not a failed text match."""
    import importlib

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent / "gpu" / "experiments"))
    with pytest.raises(LookupError, match="next_item_tile, since 0fd801d.*40c7641"):
        importlib.import_module("relay_items").restart_module()