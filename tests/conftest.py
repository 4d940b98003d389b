"""Shared fixtures: a small kernel, and a throwaway results folder."""

import json

import numpy as np
import pytest
import tvm
from tvm import te

import helpers
from helpers import mode, records

N = 1 << 12


def _vector_add() -> tvm.IRModule:
    """C = A + B on N floats, from a tensor expression (the notebooks write theirs in TVMScript)."""
    a = te.placeholder((N,), "float32", name="A")
    b = te.placeholder((N,), "float32", name="B")
    c = te.compute((N,), lambda i: a[i] + b[i], name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c]).with_attr("tirx.noalias", True)})


VectorAdd = _vector_add()


def bound_vector_add(threads: int = 128) -> tvm.s_tir.Schedule:
    """The vector add split over blocks of `threads` threads: runnable on a GPU."""
    sch = tvm.s_tir.Schedule(VectorAdd)
    (i,) = sch.get_loops(sch.get_sblock("C"))
    bx, tx = sch.split(i, [None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch


@pytest.fixture(autouse=True)
def fresh_mode(monkeypatch):
    """Each test runs in the mode of the environment it sets: the one a notebook reads at
    `helpers.start` (helpers.mode) is forgotten before the test, and restored after it."""
    monkeypatch.setattr(mode, "_current", None)


@pytest.fixture
def vector_add():
    return bound_vector_add()


@pytest.fixture
def vector_add_args():
    rng = np.random.default_rng(0)
    a = rng.random(N, dtype=np.float32)
    b = rng.random(N, dtype=np.float32)
    return [a, b, np.empty(N, np.float32)], a.astype(np.float64) + b


@pytest.fixture
def results_dir(tmp_path, monkeypatch):
    """Point the records at an empty folder, so tests never touch the committed results."""
    monkeypatch.setattr(records, "RESULTS_DIR", tmp_path)
    monkeypatch.delenv("COURSE_RECORD", raising=False)
    monkeypatch.setenv("COURSE_RECORDED_GPU", "test-gpu")
    return tmp_path


def write_record(folder, notebook, name, **extra):
    """One recorded measurement of `notebook` on a made-up "Test GPU", in a results folder."""
    entry = dict(name=name, ms=0.25, rel_err=0.0, bytes=3.0 * 4 * N, gpu="Test GPU", date="2026-11-22",
                 tvm="0.27.0.post1", notebook=notebook, **extra)
    device = dict(name="Test GPU", compute_capability="9.0", sm_count=132, clock_mhz=1980.0, dram_gbps=3352.0,
                  l2_bytes=1, shared_memory_per_block=49152, global_memory_bytes=1)
    (folder / "test-gpu").mkdir(exist_ok=True)
    data = dict(format=1, notebook=notebook, gpu="Test GPU", device=device, measurements={name: entry})
    (folder / "test-gpu" / f"{notebook}.json").write_text(json.dumps(data))


H100 = helpers.GpuSpec(name="NVIDIA H100 80GB HBM3", compute_capability="9.0", sm_count=132, clock_mhz=1980.0,
                       dram_gbps=3352.0, l2_bytes=52428800, shared_memory_per_block=49152,
                       global_memory_bytes=85_000_000_000)

needs_gpu = pytest.mark.skipif(not helpers.gpu_available(), reason="no CUDA GPU visible to TVM")
needs_nvcc = pytest.mark.skipif(helpers.nvcc_path() is None, reason="no nvcc on this machine")
