"""The Colab path: every notebook's badge and setup cell follow the one repository setting, and every
notebook runs from its setup cell in a simulated Colab runtime without changing anything of Colab's.

The simulated runtime (tests/colab/, the `colab` marker) is Colab's GPU runtime of 2026-08-19 in
what the course touches, as far as a machine without a GPU can hold it:
- Python 3.13 with Colab's own versions (tests/colab/packages.txt, each line a line of Colab's
  `pip freeze`, committed as tests/colab/pip-freeze.gpu.txt): NumPy 2.1.3, numba, XGBoost 3.4.1,
  cuda-python and cuda-bindings 12.9.7, cuda-pathfinder 1.6.0, NVRTC 12.8 from
  nvidia-cuda-nvrtc-cu12 12.8.93 (which torch 2.11+cu128 installs there), Colab's ipykernel 6.17.1
  under IPython 7.34, and a stand-in `google.colab` (tests/colab/google). Left out: torch and cupy
  (gigabytes; only cuBLAS timings on a GPU use them) and the rest of Colab's 708 packages.
- A folder standing for Colab's /usr/local/cuda (its apt CUDA 12.8 toolkit,
  tests/colab/apt-list-gpu.cuda.txt): the headers of NVIDIA's 12.8 wheels of the same parts
  (tests/colab/toolkit.txt), ptxas 12.8 and a stand-in nvcc 12.8 (tests/colab/nvcc.py: PyPI has no
  nvcc binary), first on the kernel's PATH as Colab's /usr/local/cuda/bin is. This machine's CUDA 13
  (its nvcc in /usr/local/bin, CUDA_PATH and the like) is out of the kernel's sight, and TVM finds
  the toolkit through `nvcc`, as on Colab (a test below checks which NVRTC and headers it used).
- COURSE_ARCH=sm_75 and COURSE_COMPILE_EVERY_BUILD=1: there is no GPU here, so each notebook runs
  as on Colab's T4, and every kernel it builds through `helpers.build` is compiled to machine code
  by NVRTC 12.8 with those headers, as TVM does on a GPU (for the T4, and for the target it names:
  07's sm_90a kernels, the sm_90 listings), each compile logged and checked.
All eight notebooks run top to bottom in that one runtime, in order, from their setup cells: the
first clones the repository (a snapshot of this checkout) and installs what Colab lacks, the others
reuse both. Afterwards nothing Colab had has changed and `pip check` is no worse.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
import warnings
from importlib import metadata
from pathlib import Path

import nbformat
import pytest

from tools import colab

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
EXAMPLE = "https://github.com/OWNER/NAME"  # a URL's shape, not a real repository


def test_badges_and_setup_cells_follow_the_repository_setting():
    url = colab.repository()
    if url is None:
        warnings.warn("pyproject.toml names no repository yet ([tool.course] repository is empty): the notebooks "
                      "say the course is not published instead of showing an Open in Colab badge")
    assert colab.problems(url, NOTEBOOKS) == [], "run `python -m tools.colab` after changing the setting"


@pytest.mark.parametrize("tamper", ["badge", "setup", "order", "shown in the book"])
def test_a_badge_or_setup_cell_that_disagrees_with_the_setting_is_found(tmp_path, tamper):
    path = tmp_path / "01_vector_add.ipynb"
    nb = colab.apply(nbformat.read(NOTEBOOKS[1], as_version=4), path.stem, EXAMPLE)
    setup = colab.setup_cells(nb)[0]
    if tamper == "badge":
        nb.cells[0].source = nb.cells[0].source.replace("/OWNER/NAME/", "/OWNER/OTHER/")
    elif tamper == "setup":
        setup.source = setup.source.replace("--depth", "--depth-typo")
    elif tamper == "shown in the book":
        setup.metadata["tags"].remove(colab.HIDDEN_TAG)
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


def test_the_setup_cell_is_left_out_of_the_book():
    nb = colab.apply(nbformat.read(NOTEBOOKS[1], as_version=4), NOTEBOOKS[1].stem, EXAMPLE)
    setup = colab.setup_cells(nb)[0]
    assert setup.metadata["tags"][:2] == [colab.SETUP_TAG, colab.HIDDEN_TAG]
    assert colab.HIDDEN_TAG == "remove-cell"  # the tag myst-nb (docs/conf.py's book) leaves out
    colab.apply(nb, NOTEBOOKS[1].stem, EXAMPLE)
    assert setup.metadata["tags"].count(colab.HIDDEN_TAG) == 1  # regenerating adds nothing twice


#: Runs a cell in an IPython shell as Jupyter does, with `helpers` nowhere to be found (a notebook downloaded on
#: its own), and prints what the notebook would show under the cell.
_ALONE = """
import importlib.util, sys
from IPython.core.interactiveshell import InteractiveShell
found = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a: None if name == "helpers" else found(name, *a)
shell = InteractiveShell.instance()
result = shell.run_cell(sys.stdin.read())
print("stopped" if result.error_in_exec is not None else "went on")
"""


@pytest.mark.parametrize("repository", [EXAMPLE, None])
def test_a_notebook_alone_says_in_one_line_how_to_get_the_course(tmp_path, repository):
    """Off Colab, where `helpers` cannot be imported, the setup cell stops the notebook with one line on how to
    get the course: no traceback, no bare ModuleNotFoundError at `import helpers` in the next cell."""
    done = subprocess.run([sys.executable, "-c", _ALONE], input=colab.setup_source(repository), cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    shown = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert shown[-1] == "stopped" and len(shown) == 2, done.stdout + done.stderr
    assert shown[0].startswith("NotInTheCourse: This notebook is one lesson of a course")
    assert "pip install -r requirements.txt" in shown[0]
    assert (f"git clone {EXAMPLE}" in shown[0]) == (repository is not None)


def test_with_the_course_there_the_setup_cell_only_says_so(tmp_path):
    done = subprocess.run([sys.executable, "-c", colab.setup_source(EXAMPLE)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "Not on Colab: nothing to set up.", done.stderr


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


COLAB = ROOT / "tests" / "colab"
PACKAGES = COLAB / "packages.txt"  # Colab's versions of what the course touches
FREEZE = COLAB / "pip-freeze.gpu.txt"  # Colab's own pip freeze, 2026-08-19
TOOLKIT = COLAB / "toolkit.txt"  # the wheels that stand for /usr/local/cuda
APT = COLAB / "apt-list-gpu.cuda.txt"  # Colab's CUDA 12.8 toolkit, as apt lists it
COLAB_GPU_ARCH = "sm_75"  # the T4, Colab's free GPU: the notebooks choose and compile as there


def _pins(path: Path) -> list[str]:
    return [line.split("#")[0].strip() for line in path.read_text().splitlines() if line.split("#")[0].strip()]


def test_the_simulated_packages_are_colabs_own_versions():
    freeze = FREEZE.read_text()
    assert "2026-08-19" in freeze.splitlines()[0] and "a72407924822ea377410b69f0a290150bcb5c9c2" in freeze
    colab_lines = _canonical_lines(freeze)
    assert [pin for pin in _pins(PACKAGES) if _canonical(pin) not in colab_lines] == [], \
        "tests/colab/packages.txt names a version that Colab's freeze (tests/colab/pip-freeze.gpu.txt) does not"
    pins = {_canonical(p).split("==")[0]: p.split("==")[1] for p in _pins(PACKAGES)}
    # what issue 36 found missing or wrong: Colab's NVRTC 12.8 and its pathfinder
    assert pins["cuda-pathfinder"] == "1.6.0" and pins["nvidia-cuda-nvrtc-cu12"] == "12.8.93"
    assert pins["nvidia-cuda-runtime-cu12"] == "12.8.90" and pins["cuda-bindings"] == "12.9.7"


def test_the_simulated_toolkit_is_colabs_cuda_12_8():
    apt = APT.read_text()
    assert "2026-08-19" in apt.splitlines()[1] and "a72407924822ea377410b69f0a290150bcb5c9c2" in apt
    for line in TOOLKIT.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        wheel, stands_for = line.split("#", 1)
        version = wheel.split("==")[1].strip()
        for package, apt_version in re.findall(r"(cuda-[\w-]+-12-8) ([\d.]+)", stands_for):
            assert apt_version == version, line
            assert re.search(rf"^{package}/\S+ {re.escape(version)}-\d+ amd64", apt, re.M), f"apt lists no {package} {version}"


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


def _make_toolkit(dest: Path, site: Path, scratch: Path) -> None:
    """The folder that stands for Colab's /usr/local/cuda: include/ from the toolkit wheels' headers,
    bin/ptxas, and bin/nvcc (the stand-in). A wheel the runtime already has at the toolkit's version
    (Colab's pip has three of the four) is read from its site-packages; the others are downloaded."""
    fetch = []
    for pin in _pins(TOOLKIT):
        name, version = pin.split("==")
        found = list(metadata.distributions(name=name, path=[str(site)]))
        if not found or found[0].version != version:
            fetch.append(pin)
    roots = [site]
    if fetch:
        _run(sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
             "--target", scratch, *fetch)
        roots.insert(0, scratch)  # the toolkit's version over Colab's pip one (cccl 12.8.90, not 12.9.27)
    include = dest / "include"
    for part in ("cuda_runtime", "cuda_nvcc", "cuda_cccl", "cuda_nvrtc"):
        src = next(r / "nvidia" / part / "include" for r in roots if (r / "nvidia" / part / "include").is_dir())
        shutil.copytree(src, include, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__init__.py", "__pycache__"))
    (dest / "bin").mkdir(parents=True)
    (dest / "bin" / "ptxas").symlink_to(site / "nvidia" / "cuda_nvcc" / "bin" / "ptxas")
    (dest / "targets" / "x86_64-linux").mkdir(parents=True)
    (dest / "targets" / "x86_64-linux" / "include").symlink_to(include)  # as in the toolkit
    nvcc = dest / "bin" / "nvcc"
    python = site.parent.parent.parent / "bin" / "python"
    nvcc.write_text(f'#!/bin/sh\nexec "{python}" "{COLAB / "nvcc.py"}" --toolkit "{dest}" "$@"\n')
    nvcc.chmod(0o755)


class ColabRuntime:
    """One simulated Colab runtime, shared by the tests of this module, in order."""

    def __init__(self, tmp: Path, py313: str):
        started = time.time()
        self.tmp = tmp
        self.venv = tmp / "colab-python"
        _run(py313, "-m", "venv", self.venv)
        self.python = self.venv / "bin" / "python"
        _run(self.python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "-r", PACKAGES)
        self.site = Path(_run(self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
        (self.site / "colab_stand_in.pth").write_text(str(COLAB) + "\n")  # google.colab exists
        self.toolkit = tmp / "usr-local-cuda"  # Colab's /usr/local/cuda
        _make_toolkit(self.toolkit, self.site, tmp / "toolkit-wheels")
        self.broken_before, self.freeze_before = _colab_checks(self.python)
        self.remote = tmp / "published" / "course"
        _snapshot(self.remote)
        self.content = tmp / "content"  # Colab's working directory
        self.content.mkdir()
        _run(self.python, "-m", "ipykernel", "install", "--prefix", tmp / "jupyter", "--name", "colab-sim")
        self.build_log = tmp / "builds.jsonl"
        self.notebooks_run: list[str] = []
        self.times = {"runtime": time.time() - started}

    def environ(self) -> dict[str, str]:
        """The kernel's environment: Colab's PATH (its CUDA toolkit's bin first; no /usr/local/bin, where
        this machine's CUDA 13 nvcc is), nothing that names another CUDA, and the T4's architecture."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CUDA_", "TVM_CUDA_", "COURSE_", "NVCC", "CONDA", "PYTEST_"))
               and k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV")}
        env.update(PATH=f"{self.toolkit / 'bin'}:{self.venv / 'bin'}:/usr/sbin:/usr/bin:/sbin:/bin",
                   JUPYTER_PATH=str(self.tmp / "jupyter" / "share" / "jupyter"),
                   COURSE_ARCH=COLAB_GPU_ARCH, COURSE_COMPILE_EVERY_BUILD="1", COURSE_BUILD_LOG=str(self.build_log))
        return env

    def builds(self) -> list[dict]:
        if not self.build_log.exists():
            return []
        return [json.loads(line) for line in self.build_log.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def colab_runtime(tmp_path_factory):
    py313 = _python313()
    if py313 is None:
        if os.environ.get("CI"):
            pytest.fail("CI needs Python 3.13 (pyenv's) for the simulated Colab runtime")
        pytest.skip("no Python 3.13 here")
    runtime = ColabRuntime(tmp_path_factory.mktemp("colab"), py313)
    yield runtime
    print("\nsimulated Colab runtime, seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in runtime.times.items()))


def _environ(env: dict[str, str]) -> pytest.MonkeyPatch:
    """This process's environment made `env` (the kernel inherits it); `.undo()` restores it."""
    mp = pytest.MonkeyPatch()
    for key in set(os.environ) - set(env):
        mp.delenv(key)
    for key, value in env.items():
        mp.setenv(key, value)
    return mp


@pytest.mark.colab
@pytest.mark.parametrize("name", [p.stem for p in NOTEBOOKS])
def test_notebook_runs_on_colab(colab_runtime, name):
    """The notebook, top to bottom from its setup cell, in the runtime the notebooks before it ran in:
    the first one clones the course and installs what Colab lacks, the next reuse both; every kernel
    a notebook compiles (for the T4, and 07's for sm_90a) compiles with NVRTC 12.8 and its headers."""
    from nbclient import NotebookClient

    rt = colab_runtime
    first = not rt.notebooks_run
    nb = colab.apply(nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4), name, f"file://{rt.remote}")
    for cell in (c for c in nb.cells if c.cell_type == "code"):
        cell.outputs, cell.execution_count = [], None
    nb.cells.append(nbformat.v4.new_code_cell("import os, helpers; print(os.getcwd()); print(helpers.__file__)"))
    builds_before = len(rt.builds())
    started = time.time()
    mp = _environ(rt.environ())
    try:
        NotebookClient(nb, kernel_name="colab-sim", timeout=1200, startup_timeout=600,
                       resources={"metadata": {"path": str(rt.content)}}).execute()
    finally:
        mp.undo()
        rt.times[name[:2]] = time.time() - started
        rt.notebooks_run.append(name)
    setup = "".join(o.get("text", "") for o in colab.setup_cells(nb)[0].outputs).strip()
    builds = rt.builds()[builds_before:]
    compiled = [b for b in builds if b.get("ok")]
    print(setup)  # what a student sees, and how long it took (pytest -rP shows it)
    print(f"{name}: {len(compiled)} kernel builds compiled by NVRTC 12.8 "
          f"({', '.join(sorted({b['arch'] for b in compiled}))}) in {rt.times[name[:2]]:.0f} s")
    where = "".join(o.get("text", "") for o in nb.cells[-1].outputs).split()
    assert where == [str(rt.content / "course" / "notebooks"), str(rt.content / "course" / "helpers" / "__init__.py")]
    if first:
        assert setup.startswith(f"Colab: fetched {rt.content / 'course'}; installed apache-tvm, apache-tvm-ffi, "
                                "nvidia-cuda-runtime in "), setup
    else:
        assert setup.startswith(f"Colab: reused {rt.content / 'course'}; packages already there;"), setup
    failed = [b for b in builds if "ok" in b and not b["ok"]]
    assert not failed, f"kernels that NVRTC 12.8 did not compile: {failed}"


@pytest.mark.colab
def test_the_notebooks_changed_nothing_of_colabs(colab_runtime):
    """After the notebooks, every package Colab had is at its version, and `pip check` is no worse."""
    rt = colab_runtime
    broken_after, freeze_after = _colab_checks(rt.python)
    assert broken_after <= rt.broken_before, f"the install broke: {broken_after - rt.broken_before}"
    colab_pins = {_canonical(pin) for pin in _pins(PACKAGES)}
    assert colab_pins <= _canonical_lines(rt.freeze_before), "the simulated runtime lacks Colab's versions"
    changed = _canonical_lines(rt.freeze_before) - _canonical_lines(freeze_after)
    assert not changed, f"the install changed packages Colab had: {sorted(changed)}"


#: A kernel with a tensor-core fragment and an sm_90 instruction, compiled for sm_90a as notebook 07's
#: are on every machine (helpers.kernels.device_code): which nvcc, toolkit, NVRTC and libnvrtc the
#: runtime used, or the last line of what failed.
_PROBE = r'''
import json, shutil
from tvm.support import nvcc
from cuda.bindings import nvrtc
from cuda.pathfinder import load_nvidia_dynamic_lib
from helpers.kernels import device_code
source = """#include <mma.h>
extern "C" __global__ void __launch_bounds__(32) probe(half* __restrict__ a, float* __restrict__ c) {
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, nvcuda::wmma::row_major> fa;
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> fc;
  nvcuda::wmma::load_matrix_sync(fa, a, 16);
  nvcuda::wmma::fill_fragment(fc, 0.0f);
  nvcuda::wmma::store_matrix_sync(c, fc, 16, nvcuda::wmma::mem_row_major);
  asm volatile("fence.proxy.async.shared::cta;");
}"""
facts = dict(nvcc=shutil.which("nvcc"))
try:
    facts.update(cuda_path=nvcc.find_cuda_path(), cuda_version=list(nvcc.get_cuda_version()))
    facts.update(nvrtc=list(nvrtc.nvrtcVersion()[1:]), libnvrtc=load_nvidia_dynamic_lib("nvrtc").abs_path)
    facts.update(cubin=device_code(source, "sm_90a"))
except Exception as err:
    facts["error"] = " ".join(str(err).split())[:400]
print(json.dumps(facts))
'''


@pytest.mark.colab
@pytest.mark.parametrize("remove", [None, "headers", "nvrtc"])
def test_the_simulation_fails_without_colabs_nvrtc_or_headers(colab_runtime, remove):
    """The simulation is what catches a missing compiler: with Colab's NVRTC 12.8 and headers a kernel
    compiles for sm_90a from them alone (no CUDA 13 in sight); without the headers, or without NVRTC,
    the same compile fails, as 07 did in this simulation before it held Colab's compiler stack."""
    rt = colab_runtime
    if subprocess.run([rt.python, "-c", "import tvm"], capture_output=True).returncode:
        _run(rt.python, rt.remote / "tools" / "colab.py", "install")  # what the setup cell runs
    hidden = {"headers": rt.toolkit / "include", "nvrtc": rt.site / "nvidia" / "cuda_nvrtc" / "lib"}.get(remove)
    if hidden is not None:
        hidden.rename(hidden.with_name(hidden.name + ".hidden"))
    try:
        out = _run(rt.python, "-c", _PROBE, env={**rt.environ(), "PYTHONPATH": str(rt.remote)}, cwd=rt.tmp)
    finally:
        if hidden is not None:
            hidden.with_name(hidden.name + ".hidden").rename(hidden)
    facts = json.loads(out.strip().splitlines()[-1])
    print(remove or "nothing removed", facts)
    assert facts["nvcc"] == str(rt.toolkit / "bin" / "nvcc")  # Colab's, not this machine's CUDA 13 nvcc
    if remove is None:
        assert "error" not in facts, facts
        assert facts["cuda_path"] == str(rt.toolkit) and facts["cuda_version"][:2] == [12, 8]
        assert facts["nvrtc"] == [12, 8] and facts["libnvrtc"].startswith(str(rt.site / "nvidia" / "cuda_nvrtc"))
        assert facts["cubin"] > 0
    elif remove == "headers":
        assert "Cannot find CUDA headers" in facts["error"] and "cubin" not in facts, facts
    else:
        assert "libnvrtc" in facts["error"] and "cubin" not in facts, facts


def _canonical(requirement: str) -> str:
    return re.sub(r"[-_.]+(?=[^=]*==)", "-", requirement.strip().lower())


def _canonical_lines(freeze: str) -> set[str]:
    return {_canonical(line) for line in freeze.splitlines()}
