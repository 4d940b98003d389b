"""mma.sync m16n8k16 + ldmatrix from swizzled shared memory: past WMMA's 47-49% of cuBLAS fp16? (notebook 06)

06_mma.py built the structure of TVM's mma rule (ldmatrix from XOR-swizzled shared memory, a
cp.async pipeline, blocks launched in groups) and found it held back by its instruction,
m16n8k8, whose ceiling on the H100 is 61% of cuBLAS (06_mma_peak.py); m16n8k16, the instruction
WMMA compiles to, reaches 83%. This keeps that structure and changes the instruction: TVM's
`get_mma_intrin_group` intrinsics (ldmatrix.x4 of a 16x16 tile into a warp-scope fragment, two
m16n8k16 per 16x16x16 step, accumulators stored straight from registers to C), which MetaSchedule's
rule does not use but a template can. Each variant is checked against a float64 reference and timed
beside cuBLAS in the same run.

    python3 gpu/experiments/06_mma16.py          # on the GPU
    python3 gpu/experiments/06_mma16.py --round2 # the second table, around the first one's best
    python3 gpu/experiments/06_mma16.py --round3 # the C epilogue, and a third block per SM
    python3 gpu/experiments/06_mma16.py --dry    # no GPU: build each variant for sm_90
"""

import functools
import sys

from tvm.s_tir.tensor_intrin.cuda import get_mma_intrin_group, shared_16x16_to_ldmatrix_32x8_layout

from helpers import MMA_STORE_PAIRS

from fp16_variants import (N, check_factors, compare, fresh_schedule, min_blocks_pipeline, tile_in_groups,
                           wmma_reference, workload)

INTRIN = get_mma_intrin_group(load_scope="shared.dyn", store_scope="global", in_dtype="float16",
                              out_dtype="float32", trans_a=False, trans_b=False,
                              not_use_mma_store_intrinic=False)


def fragment_layout(i, j):
    """A 16x16 tile as the 32 threads x 8 values of a warp-scope fragment (the ldmatrix layout)."""
    return (i // 16, j // 16, *shared_16x16_to_ldmatrix_32x8_layout(i % 16, j % 16))


def mma16_schedule(sch, rows, cols, k, stages=3, swizzle=True, ahead=True, pairs=False, order=(0, 1, 2, 3, 4)):
    """rows, cols: [groups, blocks per group, warps, fragments outside k, fragments inside k] of 16;
    k: [k tiles, fragment loads per tile, 16-steps per load]. swizzle: XOR-permuted shared rows
    (else rows padded by 8 halves). ahead: load the next step's fragments during this step's mma
    (two sets of fragment registers); pairs: store C with 8-byte stores (else mma_store's scalar ones);
    order: the k-tile loop's software_pipeline_order (fetch A, fetch B, load A, load B, mma)."""
    c = sch.get_sblock("C")
    i, j, kk = sch.get_loops(c)
    i, i_tc = sch.split(i, [None, 16])
    j, j_tc = sch.split(j, [None, 16])
    kk, k_tc = sch.split(kk, [None, 16])
    sch.reorder(i, j, kk, i_tc, j_tc, k_tc)
    mma = sch.blockize(i_tc)  # one 16x16x16 step: two m16n8k16 instructions
    k0, k1, warp = tile_in_groups(sch, i, j, kk, rows, cols, k)  # blocks launched in groups
    warps = rows[2] * cols[2]
    for operand in (0, 1):  # cooperative 16-byte cp.async fetches
        s = sch.cache_read(mma, operand, "shared.dyn")
        sch.compute_at(s, k0, preserve_unit_loops=True)
        _, ty, tx, v = sch.split(sch.fuse(*sch.get_loops(s)[-2:]), [None, warps, 32, 8])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        sch.vectorize(v)
        if swizzle:
            sch.annotate(s, "permuted_layout", 1)
        else:
            sch.storage_align(s, 0, axis=-2, factor=32, offset=8)
    frags = [sch.cache_read(mma, 0, "warp"), sch.cache_read(mma, 1, "warp")]
    for f in frags:
        sch.compute_at(f, k1, preserve_unit_loops=True)
    acc = sch.cache_write(mma, 0, "warp")
    sch.reverse_compute_at(acc, warp, preserve_unit_loops=True)
    tiles = []
    for f in frags + [acc]:  # each fragment copy as a loop nest over 16x16 tiles
        x, y = sch.get_loops(f)[-2:]
        x0, x1 = sch.split(x, [None, 16])
        y0, y1 = sch.split(y, [None, 16])
        sch.reorder(x0, y0, x1, y1)
        tiles.append(x1)
    sch.transform_layout(frags[0], ("write", 0), fragment_layout)
    sch.transform_layout(frags[1], ("write", 0), fragment_layout)
    sch.transform_layout(acc, ("read", 0), fragment_layout)
    init = sch.decompose_reduction(mma, k0)
    for loop, name in zip(tiles[:2], ["load_a", "load_b"]):
        load = sch.blockize(loop)  # one ldmatrix.x4
        if swizzle:  # its addresses follow the same permutation as the shared rows
            sch.annotate(load, "permuted_layout", 1)
        sch.tensorize(load, INTRIN[name])
    sch.tensorize(init, INTRIN["init"])
    sch.tensorize(mma, INTRIN["compute"])
    sch.tensorize(tiles[2], MMA_STORE_PAIRS if pairs else INTRIN["store"])
    sch.annotate(k1, "software_pipeline_stage", [0, 0, 1] if ahead else [0, 0, 0])  # fragments one 16-step ahead
    sch.annotate(k1, "software_pipeline_order", [0, 1, 2])
    s = stages - 1
    sch.annotate(k0, "software_pipeline_stage", [0, 0, s, s, s])
    sch.annotate(k0, "software_pipeline_order", list(order))
    sch.annotate(k0, "software_pipeline_async_stages", [0])
    return sch


def tiles(warps, warp_tile, group=(8, 8), k_tile=32, stages=3, swizzle=True, per_load=1, **options):
    """The schedule's arguments from a readable description: warps (rows, cols) per block, each
    computing warp_tile (rows, cols) of C; blocks launched in groups of group (rows, cols) blocks."""
    (wm, wn), (tm, tn), (gm, gn) = warps, warp_tile, group
    fm, fn = tm // 16, tn // 16  # 16x16 fragments per warp
    rows = [N // 16 // (gm * wm * fm), gm, wm, 1, fm]
    cols = [N // 16 // (gn * wn * fn), gn, wn, 1, fn]
    k = [N // k_tile, k_tile // 16 // per_load, per_load]
    check_factors(rows=(rows, N // 16), cols=(cols, N // 16), k=(k, N // 16))
    return dict(rows=rows, cols=cols, k=k, stages=stages, swizzle=swizzle, **options)


VARIANTS = {
    "2x4 warps of 64x64 (block 128x256), k 32": tiles((2, 4), (64, 64)),
    "2x4 warps of 64x64, k 64": tiles((2, 4), (64, 64), k_tile=64),
    "2x4 warps of 64x64, k 32, 4 stages": tiles((2, 4), (64, 64), stages=4),
    "2x4 warps of 64x64, k 32, padded rows": tiles((2, 4), (64, 64), swizzle=False),
    "4x2 warps of 64x64 (block 256x128), k 32": tiles((4, 2), (64, 64)),
    "2x2 warps of 64x64 (block 128x128), k 32": tiles((2, 2), (64, 64)),
    "2x2 warps of 64x64, k 32, 4 stages": tiles((2, 2), (64, 64), stages=4),
    "2x2 warps of 64x64, k 64": tiles((2, 2), (64, 64), k_tile=64),
    "4x2 warps of 32x64 (block 128x128), k 32": tiles((4, 2), (32, 64)),
    "2x4 warps of 64x32 (block 128x128), k 32": tiles((2, 4), (64, 32)),
    "2x4 warps of 64x64, k 32, groups of 16x16": tiles((2, 4), (64, 64), group=(16, 16)),
    "2x4 warps of 64x32, k 32, 4 stages": tiles((2, 4), (64, 32), stages=4),
    "2x4 warps of 64x32, k 64": tiles((2, 4), (64, 32), k_tile=64),
    "2x2 warps of 64x64, k 64, 4 stages": tiles((2, 2), (64, 64), k_tile=64, stages=4),
    "4x4 warps of 32x64 (block 128x256), k 32": tiles((4, 4), (32, 64)),
}


ROUND2 = {  # after the first table: 2 x 2 warps of 64 x 64 (two blocks per SM) led it
    "2x2 warps of 64x64, k 64 (round 1's best)": tiles((2, 2), (64, 64), k_tile=64),
    "2x2 warps of 64x64, k 64, groups of 4x4": tiles((2, 2), (64, 64), k_tile=64, group=(4, 4)),
    "2x2 warps of 64x64, k 64, groups of 16x16": tiles((2, 2), (64, 64), k_tile=64, group=(16, 16)),
    "2x2 warps of 64x64, k 64, no groups (32x32)": tiles((2, 2), (64, 64), k_tile=64, group=(32, 32)),
    "2x2 warps of 64x64, k 64, 2 stages": tiles((2, 2), (64, 64), k_tile=64, stages=2),
    "2x2 warps of 64x64, k 64, 2 steps per load": tiles((2, 2), (64, 64), k_tile=64, per_load=2),
    "2x2 warps of 64x64, k 64, padded rows": tiles((2, 2), (64, 64), k_tile=64, swizzle=False),
    "2x2 warps of 64x64, k 32, 5 stages": tiles((2, 2), (64, 64), stages=5),
    "2x2 warps of 64x64, k 32, 6 stages": tiles((2, 2), (64, 64), stages=6),
    "2x2 warps of 64x64, k 32, 4 stages, groups of 4x4": tiles((2, 2), (64, 64), stages=4, group=(4, 4)),
    "1x2 warps of 64x64 (block 64x128), k 32, 4 stages": tiles((1, 2), (64, 64), stages=4),
    "2x1 warps of 64x64 (block 128x64), k 32, 4 stages": tiles((2, 1), (64, 64), stages=4),
    "1x2 warps of 64x64, k 64": tiles((1, 2), (64, 64), k_tile=64),
    "2x2 warps of 32x64 (block 64x128), k 64": tiles((2, 2), (32, 64), k_tile=64),
}


BEST = dict(warps=(2, 2), warp_tile=(64, 64), k_tile=64, group=(4, 4))  # round 2's best
SMALL = dict(BEST, k_tile=32, stages=4)  # 64 KB of shared memory: room for three blocks per SM
ROUND3 = {  # after round 2: the C epilogue, and trading fragment registers for a third block per SM
    "2x2 warps of 64x64, k 64, groups of 4x4 (round 2's best)": tiles(**BEST),
    "the same, C stored in pairs": tiles(**BEST, pairs=True),
    "the same, fragments not loaded ahead": tiles(**BEST, ahead=False),
    "the same, tile fetch issued after the loads (order 2,3,0,1,4)": tiles(**BEST, order=(2, 3, 0, 1, 4)),
    "k 32, 4 stages, fetch after the loads": tiles(**SMALL, order=(2, 3, 0, 1, 4)),
    "k 32, 4 stages, groups of 4x4": tiles(**SMALL),
    "k 32, 4 stages, 3 blocks/SM": tiles(**SMALL, blocks_per_sm=3),
    "k 32, 4 stages, not ahead, 3 blocks/SM": tiles(**SMALL, ahead=False, blocks_per_sm=3),
    "k 32, 4 stages, not ahead, 3 blocks/SM, pairs": tiles(**SMALL, ahead=False, blocks_per_sm=3, pairs=True),
    "k 64, 2 stages, not ahead, 3 blocks/SM": tiles(**dict(BEST, stages=2), ahead=False, blocks_per_sm=3),
    "k 32, 3 stages, not ahead, 3 blocks/SM": tiles(**dict(SMALL, stages=3), ahead=False, blocks_per_sm=3),
}


def main(dry: bool, table: dict) -> int:
    func = workload()

    def make(args):
        args = dict(args)
        blocks = args.pop("blocks_per_sm", None)
        sch = mma16_schedule(fresh_schedule(func), **args)
        return (sch, min_blocks_pipeline(blocks)) if blocks else sch

    variants = {"WMMA template at 05's tiles (reference)": functools.partial(wmma_reference, func)}
    for name, args in table.items():
        variants[name] = functools.partial(make, args)
    return compare(variants, dry, width=56)


if __name__ == "__main__":
    tables = {"--round2": ROUND2, "--round3": ROUND3}
    sys.exit(main("--dry" in sys.argv, next((t for f, t in tables.items() if f in sys.argv), VARIANTS)))
