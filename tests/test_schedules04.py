"""Notebook 04's schedule function, as the notebook defines it, built for sm_90 on the CPU: the
register prefetch of section 7 must put its loads, barriers and stores where the text says, keep
a thread's registers one small array, and refuse the combinations it cannot honour."""

import runpy

import pytest

from test_exercises import _definitions, _one

NB04 = "04_matmul_shared_blocking"
CELLS = ["helpers.start(", "def matmul_module(", "def shared_blocking(", "def fetch_to_shared(", "def stage_in_registers("]
RECT = (1024, 512, 2048)
TILES = (8, 8, 16, 16, 16)


@pytest.fixture(scope="module")
def nb04(tmp_path_factory):
    setup = tmp_path_factory.mktemp("nb04") / "definitions.py"  # a file, so TVMScript can read its source
    setup.write_text("\n\n\n".join(_definitions(_one(NB04, marker)) for marker in CELLS))
    return runpy.run_path(str(setup))


def k_loop_body(nb04, **options):
    """The lines of the generated CUDA's k_0 loop, stripped."""
    lines = nb04["helpers"].cuda_source(nb04["shared_blocking"](*RECT, TILES, **options)).splitlines()
    start = next(i for i, line in enumerate(lines) if "for (int k_0" in line)
    indent = lines[start][:len(lines[start]) - len(lines[start].lstrip())]
    return [line.strip() for line in lines[start + 1:lines.index(indent + "}", start)]], "\n".join(lines)


def test_prefetch_loads_before_the_arithmetic_and_stores_after(nb04):
    body, _ = k_loop_body(nb04, a_transposed=True, pad_rows=4, stages=2, through_registers=True)
    loads = [i for i, line in enumerate(body) if "(A_ptr" in line or "(B_ptr" in line]
    barriers = [i for i, line in enumerate(body) if "__syncthreads" in line]
    fmas = [i for i, line in enumerate(body) if line.startswith("C_local_ptr[")]
    stores = [i for i, line in enumerate(body) if line.startswith(("A_shared_ptr[", "B_shared_ptr["))]
    assert loads and barriers and fmas and stores
    assert max(loads) < barriers[0] < min(fmas) and max(fmas) < barriers[-1] < min(stores), body[:12]


def test_prefetch_keeps_a_threads_registers_small_and_one_shared_buffer(nb04):
    _, src = k_loop_body(nb04, a_transposed=True, pad_rows=4, stages=2, through_registers=True)
    assert "float4 A_local_ptr[2];" in src and "float4 B_local_ptr[2];" in src, \
        [line for line in src.splitlines() if "_local_ptr[" in line and "alignas" in line]
    _, double = k_loop_body(nb04, a_transposed=True, pad_rows=4, stages=2)
    shared = lambda text: [line.strip() for line in text.splitlines() if "__shared__" in line]
    # the plain two-stage pipeline doubles its buffers; the prefetch stores after computing: one suffices
    assert shared(src) != shared(double)
    assert "A_shared_ptr[2112]" in " ".join(shared(src)) and "A_shared_ptr[4224]" in " ".join(shared(double))


@pytest.mark.parametrize("options", [dict(stages=3), dict(stages=2, async_copy=True), dict(stages=1)])
def test_prefetch_refuses_other_pipelines(nb04, options):
    with pytest.raises(ValueError, match="through_registers is a two-stage pipeline of its own"):
        nb04["shared_blocking"](*RECT, TILES, pad_rows=4, through_registers=True, **options)
