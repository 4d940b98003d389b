"""Notebook 07's ladder and notebook 08's persistent kernel, as the notebooks define them, built for
sm_90a on the CPU: each ladder step adds its instructions; the epilogue through shared memory (08's
`persistent_matmul_tma_store`) must hand each chunk of C to the TMA only
after a fence and a barrier, write every slot of its buffers once and without bank conflicts,
and refuse what it cannot do."""

import re

import pytest

import helpers

NB07, NB08 = "07_hopper_wgmma_tma", "08_hopper_persistent_kernel"
SHAPE = (1024, 1024, 128)  # the smallest problem that groups of 8 block rows of 128 x 256 tile


@pytest.fixture(scope="module")
def nb07():
    """Notebook 07's kernels (its ladder included), then notebook 08's persistent kernel: their exports."""
    return vars(helpers.lessons.lesson(NB07)) | vars(helpers.lessons.lesson(NB08))


def cuda_of(nb07, kernel) -> str:
    src = nb07["helpers"].build(kernel, "sm_90a", tir_pipeline="tirx").mod.imports[0].inspect_source()
    return src[src.index('extern "C" __global__ void'):]


def test_each_step_of_the_ladder_adds_its_instructions(nb07):
    """07's ladder: (a) wgmma on tiles the threads load, no TMA and no mbarrier; (c) the same with the
    TMA and one mbarrier; (d) a ring of stages; (e) the producer warpgroup and setmaxnreg."""
    M = N = K = 256
    plain, tma = cuda_of(nb07, nb07["wgmma_matmul"](M, N, K)), cuda_of(nb07, nb07["tma_matmul"](M, N, K))
    ring = cuda_of(nb07, nb07["hopper_matmul"](M, N, K, 256, 4, False))
    specialized = cuda_of(nb07, nb07["hopper_matmul"](M, N, K))
    assert "mma_async" in plain and "fence_proxy" in plain and "cp_async_bulk_tensor" not in plain
    assert "mbarrier" not in plain and "__launch_bounds__(256)" in plain
    assert "cp_async_bulk_tensor" in tma and "mbarrier_wait" in tma and "fence_proxy" not in tma
    assert "setmaxnreg" not in ring and "__launch_bounds__(256)" in ring
    assert "setmaxnreg" in specialized and "__launch_bounds__(384)" in specialized


def test_the_lone_copy_undoes_the_swizzle_it_was_written_with(nb07):
    """tma_copy reads unit u ^ (r % 8) of row r back into unit u: the inverse of the 128-byte swizzle,
    the layout load_by_threads writes by hand."""
    src = cuda_of(nb07, nb07["tma_copy"](256, 256, 128, 64))
    assert src.count("cp_async_bulk_tensor") == 1 and "expect_tx" in src and "mbarrier_wait" in src
    assert "(((int)threadIdx.x) & 7) ^" in src


def kernel_lines(nb07, step="persistent_matmul", **options) -> list[str]:
    return [line.strip() for line in cuda_of(nb07, nb07[step](*SHAPE, 132, **options)).splitlines()]


EVENTS = {"wait_group_read": "wait until read", "warpgroup_sync": "barrier", "fence_proxy": "fence",
          "s2g": "TMA store", "bulk_commit_group": "commit", "bulk_wait_group_0": "wait for all"}


@pytest.mark.parametrize("out_dtype, chunks", [("float16", 4), ("float32", 8)])
def test_each_chunk_goes_to_the_tma_after_a_fence_and_a_barrier(nb07, out_dtype, chunks):
    lines = kernel_lines(nb07, "persistent_matmul_tma_store", out_dtype=out_dtype)
    events = [name for line in lines for key, name in EVENTS.items() if key in line and "(" in line]
    one_chunk = ["wait until read", "barrier", "fence", "barrier", "TMA store", "commit"]
    assert events == one_chunk * chunks + ["wait for all"], events  # 128 bytes of a row per chunk


def test_without_tma_store_c_goes_straight_from_the_registers(nb07):
    lines = kernel_lines(nb07, out_dtype="float16")
    assert not any("s2g" in line or "fence_proxy" in line for line in lines)
    assert sum(line.startswith("*(half2*)(C_ptr + ") for line in lines) == 256 // 8 * 2  # 2 rows per 8 columns


@pytest.mark.parametrize("out_dtype, most_per_bank", [("float16", 1), ("float32", 2)])
def test_the_epilogue_fills_its_buffers_once_with_few_bank_conflicts(nb07, out_dtype, most_per_bank):
    """Evaluate each store into the shared buffers for every thread of consumer 0 (threads 128-255):
    each chunk writes every element of its buffer once; a warp's store of fp16 pairs (4 bytes a
    lane) puts one word in each of the 32 banks, one of fp32 pairs (8 bytes, a half-warp at a time)
    at most two: rows r and r ^ 1 swizzle the same two 16-byte units into each other's place."""
    size = 2 if out_dtype == "float16" else 4
    ctype = {"float16": "half", "float32": "float"}[out_dtype]
    store = re.compile(rf"\*\({ctype}2\*\)\(\(\({ctype}\*\)pool_ptr\) \+ (.*)\) = (__\d+|\*\(float2\*\)\(acc_ptr \+ \d+\));$")
    offsets = [store.match(line).group(1) for line in kernel_lines(nb07, "persistent_matmul_tma_store", out_dtype=out_dtype)
               if store.match(line)]
    chunks, elements = 256 * size // 128, 64 * 128 // size  # a buffer: 64 rows of 128 bytes
    per_chunk = len(offsets) // chunks
    assert per_chunk * chunks == len(offsets) and per_chunk * 128 * 2 == elements  # two elements per store

    def at(expr, tid):
        return eval(expr.replace("((int)threadIdx.x)", str(tid)))  # the CUDA's integer arithmetic

    lanes = 32 * 4 // (2 * size)  # the lanes one shared-memory wavefront serves: 32 of 4 bytes, 16 of 8
    for first in range(0, len(offsets), per_chunk):
        written = [at(expr, tid) for expr in offsets[first:first + per_chunk] for tid in range(128, 256)]
        assert len(set(written)) == len(written) and max(written) - min(written) == elements - 2
        for expr in offsets[first:first + per_chunk]:
            for lane0 in range(128, 256, lanes):
                words = [at(expr, tid) * size // 4 + w for tid in range(lane0, lane0 + lanes) for w in range(size // 2)]
                per_bank = max(sum(1 for word in words if word % 32 == bank) for bank in range(32))
                assert per_bank == most_per_bank, (expr, lane0)


def test_the_epilogue_fits_a_hopper_block_with_four_stages_of_128_x_256(nb07):
    limit = nb07["helpers"].arch_constants("9.0")["smem_block"]
    shared_bytes = nb07["shared_bytes"]
    assert shared_bytes(256, 4, True) <= limit < shared_bytes(256, 5, True)
    assert shared_bytes(256, 4, True) - shared_bytes(256, 4) == nb07["C_BUFFERS"] == 4 * 64 * 128


@pytest.mark.parametrize("options", [dict(out_dtype="float16", block_n=64), dict(out_dtype="float16", block_n=192)])
def test_tma_store_refuses_what_it_cannot_do(nb07, options):
    with pytest.raises(ValueError, match="the TMA store needs an even number of 128-byte chunks"):
        nb07["persistent_matmul_tma_store"](1024, 1536, 128, 132, **options)  # 1536: 8 x 192


def test_a_block_of_64_rows_has_one_consumer_and_expects_its_smaller_a_tile(nb07):
    """block_m=64 (section 7's small problems): a producer and one consumer warpgroup, 256 threads,
    and each stage's barrier expects 64 rows of A besides B's block_n columns, in bytes."""
    tall, low = (" ".join(kernel_lines(nb07, block_n=64, group=1, block_m=rows)) for rows in (128, 64))
    assert "__launch_bounds__(384)" in tall and "__launch_bounds__(256)" in low
    assert "(uint)24576" in tall and "(uint)24576" not in low  # (128 + 64) x 64 halves
    assert "(uint)16384" in low  # (64 + 64) x 64 halves


@pytest.mark.parametrize("step, options, says", [
    ("persistent_matmul", dict(block_m=256), "with blocks of 256 rows"),
    ("persistent_matmul_pingpong", dict(block_m=64, block_n=128), "ping-pong blocks of 128")])
def test_a_block_the_kernel_cannot_be_is_refused(nb07, step, options, says):
    with pytest.raises(ValueError, match=says):
        nb07[step](*SHAPE, 132, group=1, **options)
