"""Notebook 04's step functions, as the notebook defines them, built for sm_90 on the CPU: the
register prefetch of section 7 must put its loads, barriers and stores where the text says and keep
a thread's registers one small array, and `async_copies` must refuse the tile it cannot copy."""

import ast

import pytest

import helpers

NB04 = "04_matmul_shared_blocking"
STEPS = {"matmul_module", "schedule", "tile_block", "loop", "unroll_tile", "zero_first", "shared_tiles", "stage_in_shared",
         "cooperative_fetch", "shared_kernel", "stage_in_registers", "pad_rows", "transpose_a", "interleaved", "transposed",
         "padded_ik", "pipeline", "async_copies", "fetch_through_registers", "prefetched"}
RECT = (1024, 512, 2048)
TILES = (8, 8, 16, 16, 16)


@pytest.fixture(scope="module")
def nb04():
    exports = vars(helpers.lessons.lesson(NB04))
    assert STEPS <= set(exports), f"{NB04} exports no {sorted(STEPS - set(exports))}"
    return exports


def k_loop_body(nb04, sch):
    """The lines of the generated CUDA's k_0 loop, stripped, and the whole source."""
    lines = nb04["helpers"].cuda_source(nb04["zero_first"](sch)).splitlines()
    start = next(i for i, line in enumerate(lines) if "for (int k_0" in line)
    indent = lines[start][:len(lines[start]) - len(lines[start].lstrip())]
    return [line.strip() for line in lines[start + 1:lines.index(indent + "}", start)]], "\n".join(lines)


def test_prefetch_loads_before_the_arithmetic_and_stores_after(nb04):
    body, _ = k_loop_body(nb04, nb04["prefetched"](nb04["schedule"](RECT), TILES))
    loads = [i for i, line in enumerate(body) if "(A_ptr" in line or "(B_ptr" in line]
    barriers = [i for i, line in enumerate(body) if "__syncthreads" in line]
    fmas = [i for i, line in enumerate(body) if line.startswith("C_local_ptr[")]
    stores = [i for i, line in enumerate(body) if line.startswith(("A_shared_ptr[", "B_shared_ptr["))]
    assert loads and barriers and fmas and stores
    assert max(loads) < barriers[0] < min(fmas) and max(fmas) < barriers[-1] < min(stores), body[:12]


def test_prefetch_keeps_a_threads_registers_small_and_one_shared_buffer(nb04):
    _, src = k_loop_body(nb04, nb04["prefetched"](nb04["schedule"](RECT), TILES))
    assert "float4 A_local_ptr[2];" in src and "float4 B_local_ptr[2];" in src, \
        [line for line in src.splitlines() if "_local_ptr[" in line and "alignas" in line]
    _, double = k_loop_body(nb04, nb04["pipeline"](nb04["transposed"](nb04["schedule"](RECT), TILES)))
    shared = lambda text: [line.strip() for line in text.splitlines() if "__shared__" in line]
    # the plain two-stage pipeline doubles its buffers; the prefetch stores after computing: one suffices
    assert shared(src) != shared(double)
    assert "A_shared_ptr[2112]" in " ".join(shared(src)) and "A_shared_ptr[4224]" in " ".join(shared(double))


def test_async_copies_refuse_a_transposed_tile(nb04):
    with pytest.raises(ValueError, match="cannot transpose the A tile"):
        nb04["async_copies"](nb04["pipeline"](nb04["transposed"](nb04["schedule"](RECT), TILES)))
    # the [i][k] tile is copied as it is: accepted
    nb04["async_copies"](nb04["pipeline"](nb04["padded_ik"](nb04["schedule"](RECT), TILES)))


def test_each_optimization_is_a_step_not_a_switch(nb04):
    """No step function takes a boolean: each optimization is its own function."""
    tree = ast.parse("\n".join(helpers.lessons.exported_cells(NB04)))
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        defaults = [d for d in fn.args.defaults + fn.args.kw_defaults if d is not None]
        assert not any(isinstance(d, ast.Constant) and isinstance(d.value, bool) for d in defaults), fn.name
