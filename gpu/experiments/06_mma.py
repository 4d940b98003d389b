"""Can mma.sync + ldmatrix with swizzled shared memory beat WMMA's 47-48% of cuBLAS fp16? (notebook 06)

The WMMA template's search ended on notebook 05's own tiles, so its numbers are exhausted. This
tries the other tensor-core structure TVM has: `mma.sync.m16n8k8` fed by `ldmatrix` from shared
memory laid out with a permuted (XOR-swizzled) layout, a cp.async pipeline, and blocks ordered in
groups for L2 reuse: the structure MetaSchedule's own mma rule builds (the trace of TVM's
tests/python/s_tir/meta_schedule/test_meta_schedule_mma_tensorize.py), here written as a schedule
with its tile sizes as arguments, at several tile sizes, each checked against a float64 reference
and timed beside cuBLAS.

    python3 gpu/experiments/06_mma.py          # on the GPU
    python3 gpu/experiments/06_mma.py --dry    # no GPU: build each variant for sm_90
"""

import functools
import sys

import tvm.s_tir.tensor_intrin.cuda  # noqa: F401  (registers the mma intrinsics)

from fp16_variants import N, check_factors, compare, fresh_schedule, tile_in_groups, wmma_reference, workload


def mma_schedule(sch, rows, cols, k, stages=3, early=False):
    """rows: [groups, blocks per group, warps, fragments outside k, fragments inside k] of 16 rows;
    cols: the same in units of 8 columns; k: [k tiles, fragment loads per tile, k steps per load] of 8."""
    c = sch.get_sblock("C")
    i, j, kk = sch.get_loops(c)
    kk, k_tc = sch.split(kk, [None, 8])
    j, j_tc = sch.split(j, [None, 8])
    i, i_tc = sch.split(i, [None, 16])
    sch.reorder(i, j, kk, i_tc, j_tc, k_tc)
    mma = sch.blockize(i_tc)  # one m16n8k8 operation
    sch.annotate(mma, "warp_execution", 1)
    k0, k1, warp = tile_in_groups(sch, i, j, kk, rows, cols, k)  # blocks launched in groups
    sch.write_at(warp, mma, 0, "m16n8k8.matrixC")  # accumulators in registers, stored straight to C
    for operand, name in ((0, "A"), (1, "B")):  # every shared copy first: read_at needs k0's body clean
        s = sch.read_at(k0, mma, operand, "shared.dyn")
        sch.annotate(s, "permuted_layout", f"g2s_{name}")  # XOR-swizzled rows: ldmatrix without conflicts
        sch.annotate(s, "vector_bytes", 16)
    for operand, name in ((0, "A"), (1, "B")):
        frag = sch.cache_read(mma, operand, f"m16n8k8.matrix{name}")
        sch.compute_at(frag, k1, preserve_unit_loops=True)
        x, y = sch.get_loops(frag)[-2:]
        if name == "A":  # 32 rows x 8 k per ldmatrix.x4
            x0, x1 = sch.split(x, [None, 32])
            y0, y1 = sch.split(y, [None, 8])
        else:  # 8 k x 32 columns per ldmatrix.x4.trans
            x0, x1 = sch.split(x, [None, 8])
            y0, y1 = sch.split(y, [None, 32])
        sch.reorder(x0, y0, x1, y1)
        load = sch.blockize(x1)
        sch.annotate(load, "permuted_layout", f"s2l_{name}")
        sch.tensorize(load, f"mma_load_m16n8k8_f16_{name}_shared_dyn")
    sch.annotate(k1, "software_pipeline_stage", [0, 0, 1])
    sch.annotate(k1, "software_pipeline_order", [0, 1, 2])
    s = stages - 1
    sch.annotate(k0, "software_pipeline_async_stages", [0])
    if early:  # fragments of the next k tile loaded during this one (indexed by k0 % 2: not registers)
        sch.annotate(k0, "software_pipeline_stage", [0, 0, s - 1, s, s])
        sch.annotate(k0, "software_pipeline_order", [0, 1, 3, 2, 4])
    else:  # fragments double-buffered across the k1 loads only, which nvcc unrolls
        sch.annotate(k0, "software_pipeline_stage", [0, 0, s, s, s])
        sch.annotate(k0, "software_pipeline_order", [0, 1, 2, 3, 4])
    init = sch.decompose_reduction(mma, k0)
    sch.tensorize(init, "mma_init_m16n8k8_f32")
    sch.tensorize(mma, "mma_sync_m16n8k8_f16f16f32")
    return sch


def tiles(warps, warp_tile, group=(16, 16), k_tile=32, loads=4, stages=3, early=False):
    """The schedule's arguments from a readable description: warps (rows, cols) per block, each
    computing warp_tile (rows, cols) of C; blocks launched in groups of group (rows, cols) blocks."""
    (wm, wn), (tm, tn), (gm, gn) = warps, warp_tile, group
    fm, fn = tm // 16, tn // 8  # m16n8 fragments per warp
    im, in_ = min(4, fm), min(2, fn)  # fragments in the innermost loops (as in TVM's test trace)
    rows = [N // 16 // (gm * wm * fm), gm, wm, fm // im, im]
    cols = [N // 8 // (gn * wn * fn), gn, wn, fn // in_, in_]
    k = [N // k_tile, loads, k_tile // 8 // loads]
    check_factors(rows=(rows, N // 16), cols=(cols, N // 8), k=(k, N // 8))
    return rows, cols, k, stages, early


VARIANTS = {
    "2x2 warps of 64x64 (block 128x128)": tiles((2, 2), (64, 64)),
    "4x2 warps of 32x64 (block 128x128)": tiles((4, 2), (32, 64)),
    "2x4 warps of 64x64 (block 128x256)": tiles((2, 4), (64, 64)),
    "4x2 warps of 64x64 (block 256x128)": tiles((4, 2), (64, 64)),
    "2x4 warps of 64x64, blocks in groups of 8x8": tiles((2, 4), (64, 64), group=(8, 8)),
    "2x4 warps of 64x64, 4 stages": tiles((2, 4), (64, 64), stages=4),
    "2x4 warps of 64x64, k tile 64": tiles((2, 4), (64, 64), k_tile=64, loads=8),
    "2x4 warps of 64x64, k tile 64 in 16-wide loads": tiles((2, 4), (64, 64), k_tile=64, loads=4),
    "2x4 warps of 64x64, k tile 64, 4 stages": tiles((2, 4), (64, 64), k_tile=64, loads=8, stages=4),
    "2x4 warps of 64x64, early fragments (stack)": tiles((2, 4), (64, 64), loads=1, early=True),
    "2x2 warps of 64x128 (block 128x256, spills)": tiles((2, 2), (64, 128)),
}


def main(dry: bool) -> int:
    func = workload()
    variants = {"WMMA template at 05's tiles (reference)": functools.partial(wmma_reference, func)}
    for name, args in VARIANTS.items():
        variants[name] = functools.partial(lambda a: mma_schedule(fresh_schedule(func), *a), args)
    return compare(variants, dry, width=52)


if __name__ == "__main__":
    sys.exit(main("--dry" in sys.argv))
