"""The Colab path: every notebook's badge and setup cell follow the one repository setting, and the
setup cell works in a simulated Colab runtime (Python 3.13, Colab's versions of the packages an
install could break) without breaking any of them."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import warnings
from importlib import metadata
from pathlib import Path

import nbformat
import pytest

from helpers import colab

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
EXAMPLE = "https://github.com/OWNER/NAME"  # a URL's shape, not a real repository


def test_badges_and_setup_cells_follow_the_repository_setting():
    url = colab.repository()
    if url is None:
        warnings.warn("pyproject.toml names no repository yet ([tool.course] repository is empty): the notebooks "
                      "say the course is not published instead of showing an Open in Colab badge")
    assert colab.problems(url, NOTEBOOKS) == [], "run `python -m helpers.colab` after changing the setting"


@pytest.mark.parametrize("tamper", ["badge", "setup", "order"])
def test_a_badge_or_setup_cell_that_disagrees_with_the_setting_is_found(tmp_path, tamper):
    path = tmp_path / "01_vector_add.ipynb"
    nb = colab.apply(nbformat.read(NOTEBOOKS[1], as_version=4), path.stem, EXAMPLE)
    setup = colab.setup_cells(nb)[0]
    if tamper == "badge":
        nb.cells[0].source = nb.cells[0].source.replace("/OWNER/NAME/", "/OWNER/OTHER/")
    elif tamper == "setup":
        setup.source = setup.source.replace("--depth", "--depth-typo")
    else:
        nb.cells.remove(setup)
        nb.cells.insert(3, setup)
    nbformat.write(nb, path)
    assert len(colab.problems(EXAMPLE, [path], readme=None)) == 1


def test_generating_for_a_github_repository_writes_colab_links_once(tmp_path):
    paths = [Path(shutil.copy(p, tmp_path)) for p in NOTEBOOKS[:2]]
    readme = Path(shutil.copy(ROOT / "README.md", tmp_path))
    assert colab.generate(EXAMPLE, paths, readme) == paths + [readme]
    assert colab.generate(EXAMPLE, paths, readme) == []  # idempotent
    assert colab.problems(EXAMPLE, paths, readme) == []
    link = "https://colab.research.google.com/github/OWNER/NAME/blob/main/notebooks/01_vector_add.ipynb"
    nb = nbformat.read(paths[1], as_version=4)
    first = nb.cells[0].source.splitlines()
    assert first[2] == f"[![Open In Colab]({colab.BADGE_IMAGE})]({link})"
    assert sum(link in line for line in readme.read_text().splitlines()) == 1
    setups = colab.setup_cells(nb)
    assert len(setups) == 1 and f"REPOSITORY = {EXAMPLE!r}" in setups[0].source


def test_colab_links_need_a_github_repository():
    assert colab.colab_url(EXAMPLE + ".git", "05_x") == \
        "https://colab.research.google.com/github/OWNER/NAME/blob/main/notebooks/05_x.ipynb"
    for url in (None, "", "file:///srv/course", "https://gitlab.com/OWNER/NAME"):
        assert colab.colab_url(url, "05_x") is None
        assert colab.badge(url, "05_x") == colab.NO_BADGE


def test_the_install_asks_only_for_what_is_missing():
    have = metadata.version("pytest")
    assert colab.missing([f"pytest=={have}", "pytest==0.0.1", "nbformat", "no-such-package-here==1.0"]) == \
        ["pytest==0.0.1", "no-such-package-here==1.0"]
    pins = colab.installed_constraints().splitlines()
    assert f"numpy=={metadata.version('numpy')}" in pins and f"pytest=={have}" in pins


def test_the_colab_requirements_pin_what_colab_lacks_and_name_what_it_has():
    reqs = colab.requirements()
    pinned = {colab._name(r) for r in reqs if "==" in r}
    assert pinned == {"apache-tvm", "apache-tvm-ffi", "nvidia-cuda-runtime"}
    course = {colab._name(r): r for r in colab.requirements(ROOT / "requirements.txt") if "==" in r}
    assert all(course[colab._name(r)] == r for r in reqs if "==" in r), "requirements-colab.txt pins as requirements.txt does"
    for colab_has in ("numpy", "xgboost", "cuda-bindings", "scipy", "matplotlib", "psutil"):
        assert colab_has in reqs  # named unpinned: whatever version Colab has


# ---------------------------------------------------------------- the simulated runtime


def _python313() -> str | None:
    """A Python 3.13 interpreter: pyenv's (as on the course's machines), else one on the PATH that runs."""
    candidates = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.13*/bin/python3.13")))
    candidates += [shutil.which("python3.13")] if shutil.which("python3.13") else []
    for python in candidates:
        if subprocess.run([python, "--version"], capture_output=True).returncode == 0:
            return python
    return None


def _run(*cmd, **kw) -> str:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _snapshot(dest: Path) -> None:
    """This working tree (tracked and untracked files git does not ignore) as a one-commit repository:
    what the setup cell will clone, as Colab clones the published repository."""
    files = _run("git", "ls-files", "-co", "--exclude-standard", "-z", cwd=ROOT).split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    _run("git", "init", "-q", "-b", "main", cwd=dest)
    _run("git", "add", "-A", cwd=dest)
    _run("git", "-c", "user.name=test", "-c", "user.email=test@localhost", "commit", "-q", "-m", "snapshot", cwd=dest)


def _colab_checks(python: Path) -> tuple[set[str], str]:
    """`pip check`'s complaints, and the versions of Colab's packages; asserts numba, xgboost and
    cuda-python import."""
    _run(python, "-c", "import numba, xgboost, cuda.bindings.nvrtc")
    check = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True).stdout
    return set(check.splitlines()) - {"No broken requirements found."}, _run(python, "-m", "pip", "freeze")


@pytest.mark.colab
def test_colab_runtime_simulated(tmp_path, monkeypatch):
    """Colab, as far as a machine without a GPU can be: Python 3.13 with Colab's package versions and a
    `google.colab` module; the setup cell of notebook 01 clones the repository (here: a snapshot of
    this checkout), installs what is missing, and the notebook runs top to bottom; notebook 05 then
    runs in the same runtime and reuses both. Nothing Colab had changes, and `pip check` is no worse."""
    py313 = _python313()
    if py313 is None:
        if os.environ.get("CI"):
            pytest.fail("CI needs Python 3.13 (pyenv's) for the simulated Colab runtime")
        pytest.skip("no Python 3.13 here")
    sim = tmp_path / "colab-python"
    _run(py313, "-m", "venv", sim)
    python = sim / "bin" / "python"
    packages = ROOT / "tests" / "colab" / "packages.txt"
    _run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "-r", packages)
    _run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-c", packages, "ipykernel==6.17.1")
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    (site / "colab_stand_in.pth").write_text(str(ROOT / "tests" / "colab") + "\n")  # google.colab exists
    broken_before, freeze_before = _colab_checks(python)

    remote = tmp_path / "published" / "course"
    _snapshot(remote)
    content = tmp_path / "content"  # Colab's working directory
    content.mkdir()
    _run(python, "-m", "ipykernel", "install", "--prefix", tmp_path / "jupyter", "--name", "colab-sim")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter" / "share" / "jupyter"))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.delenv("COURSE_ROOT", raising=False)
    from nbclient import NotebookClient

    setup_lines = []
    for name in ("01_vector_add", "05_tensor_core_tensorization"):
        nb = colab.apply(nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4), name, f"file://{remote}")
        for cell in (c for c in nb.cells if c.cell_type == "code"):
            cell.outputs, cell.execution_count = [], None
        nb.cells.append(nbformat.v4.new_code_cell("import os, helpers; print(os.getcwd()); print(helpers.__file__)"))
        NotebookClient(nb, kernel_name="colab-sim", timeout=1200, startup_timeout=600,
                       resources={"metadata": {"path": str(content)}}).execute()
        setup = colab.setup_cells(nb)[0]
        setup_lines.append("".join(o.get("text", "") for o in setup.outputs).strip())
        where = "".join(o.get("text", "") for o in nb.cells[-1].outputs).split()
        assert where == [str(content / "course" / "notebooks"), str(content / "course" / "helpers" / "__init__.py")]
    broken_after, freeze_after = _colab_checks(python)
    assert broken_after <= broken_before, f"the install broke: {broken_after - broken_before}"
    colab_pins = {_canonical(line.split("#")[0]) for line in packages.read_text().splitlines()} - {""}
    assert colab_pins <= _canonical_lines(freeze_before), "the simulated runtime lacks Colab's versions"
    changed = _canonical_lines(freeze_before) - _canonical_lines(freeze_after)
    assert not changed, f"the install changed packages Colab had: {sorted(changed)}"

    print("\n".join(setup_lines))  # what a student sees, and how long it took (pytest -rP shows it)
    assert setup_lines[0].startswith(f"Colab: fetched {content / 'course'}; installed apache-tvm, apache-tvm-ffi, "
                                     "nvidia-cuda-runtime in "), setup_lines[0]
    assert setup_lines[1].startswith(f"Colab: reused {content / 'course'}; packages already there;"), setup_lines[1]


def _canonical(requirement: str) -> str:
    return re.sub(r"[-_.]+(?=[^=]*==)", "-", requirement.strip().lower())


def _canonical_lines(freeze: str) -> set[str]:
    return {_canonical(line) for line in freeze.splitlines()}
