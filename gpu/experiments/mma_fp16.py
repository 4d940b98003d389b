"""The fp16 mma.sync schedules of 06_fp16.py: TVM's mma rule structure (fragments loaded by ldmatrix
from XOR-swizzled shared memory, a cp.async pipeline, blocks launched in groups) on m16n8k8 and on
m16n8k16, their tiles from a readable description, and the variant tables of the studies
mma-m16n8k8, mma-m16n8k16, -refine and -epilogue, all at 4096^3."""

from __future__ import annotations

import numpy as np
import tvm
from tvm.s_tir.tensor_intrin.cuda import get_mma_intrin_group, shared_16x16_to_ldmatrix_32x8_layout

from helpers import MMA_STORE_PAIRS
from schedules import blockize_fragments, tile_copy

N = 4096


def check_factors(**splits):
    """Each split (name=(factors, extent)) must be positive factors whose product is the extent."""
    for name, (factors, extent) in splits.items():
        if min(factors) < 1 or int(np.prod(factors)) != extent:
            raise ValueError(f"{name} factors {factors} do not tile {extent}")


def tile_in_groups(sch, i, j, k, rows, cols, ks):
    """Split i and j by `rows`, `cols` into [groups, blocks per group, warps, outer, inner] and k by
    `ks` into [tiles, loads per tile, steps per load]; bind the groups to blockIdx.z/y and the
    blocks inside a group to blockIdx.x, so that blocks which run together share A and B in L2,
    and the warps to threadIdx.y. Returns the k tile loop, the load loop and the warp loop."""
    i0, i1, i2, i3, i4 = sch.split(i, rows)
    j0, j1, j2, j3, j4 = sch.split(j, cols)
    k0, k1, k2 = sch.split(k, ks)
    sch.reorder(i0, j0, i1, j1, i2, j2, k0, k1, i3, j3, k2, i4, j4)
    sch.bind(i0, "blockIdx.z")
    sch.bind(j0, "blockIdx.y")
    sch.bind(sch.fuse(i1, j1), "blockIdx.x")
    warp = sch.fuse(i2, j2)
    sch.bind(warp, "threadIdx.y")
    return k0, k1, warp


def min_blocks_pipeline(blocks: int, base: str = "s_tir") -> str:
    """The name of a TIR pipeline, `base` (TVM's default one, or "tirx" for kernels written with explicit
    threads), that also gives each kernel
    `__launch_bounds__(threads, blocks)`: ptxas then keeps registers low enough for `blocks` blocks
    per SM (spilling if it must). A schedule cannot say this: the attribute lives on the device
    function, which exists only after the pipeline splits host from device."""
    from tvm.tirx import compilation_pipeline

    name = f"{base}_{blocks}_blocks_per_sm"
    if name not in compilation_pipeline.PIPELINE_MAP:
        def pipeline(**kwargs):
            lower, host, device = compilation_pipeline.get_tir_pipeline(base, **kwargs)

            @tvm.tirx.transform.prim_func_pass(opt_level=0)
            def bound(func, _mod, _ctx):
                return func.with_attr("tirx.launch_bounds_min_blocks_per_sm", blocks)

            return lower, host, lambda: tvm.transform.Sequential([device(), bound])

        compilation_pipeline.PIPELINE_MAP[name] = pipeline
    return name


# ------------------------------------------------------------------ mma-m16n8k8: TVM's mma rule structure


def mma8_schedule(sch, rows, cols, k, stages=3, early=False):
    """rows: [groups, blocks per group, warps, fragments outside k, fragments inside k] of 16 rows;
    cols: the same in units of 8 columns; k: [k tiles, fragment loads per tile, k steps per load] of 8."""
    mma, i, j, kk = blockize_fragments(sch, sch.get_sblock("C"), 16, 8, 8)  # one m16n8k8 operation
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
        # one ldmatrix.x4 loads 32 rows x 8 k of A, or (.trans) 8 k x 32 columns of B
        load = sch.blockize(tile_copy(sch, frag, *((32, 8) if name == "A" else (8, 32)))[2])
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


def mma8_tiles(warps, warp_tile, group=(16, 16), k_tile=32, loads=4, stages=3, early=False):
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


MMA8 = {
    "2x2 warps of 64x64 (block 128x128)": mma8_tiles((2, 2), (64, 64)),
    "4x2 warps of 32x64 (block 128x128)": mma8_tiles((4, 2), (32, 64)),
    "2x4 warps of 64x64 (block 128x256)": mma8_tiles((2, 4), (64, 64)),
    "4x2 warps of 64x64 (block 256x128)": mma8_tiles((4, 2), (64, 64)),
    "2x4 warps of 64x64, blocks in groups of 8x8": mma8_tiles((2, 4), (64, 64), group=(8, 8)),
    "2x4 warps of 64x64, 4 stages": mma8_tiles((2, 4), (64, 64), stages=4),
    "2x4 warps of 64x64, k tile 64": mma8_tiles((2, 4), (64, 64), k_tile=64, loads=8),
    "2x4 warps of 64x64, k tile 64 in 16-wide loads": mma8_tiles((2, 4), (64, 64), k_tile=64, loads=4),
    "2x4 warps of 64x64, k tile 64, 4 stages": mma8_tiles((2, 4), (64, 64), k_tile=64, loads=8, stages=4),
    "2x4 warps of 64x64, early fragments (stack)": mma8_tiles((2, 4), (64, 64), loads=1, early=True),
    "2x2 warps of 64x128 (block 128x256, spills)": mma8_tiles((2, 2), (64, 128)),
}


# ------------------------------------------------------------------ mma-m16n8k16: the same structure, WMMA's instruction

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
    mma, i, j, kk = blockize_fragments(sch, sch.get_sblock("C"), 16, 16, 16)  # two m16n8k16 instructions
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
    tiles = [tile_copy(sch, f, 16, 16)[2] for f in frags + [acc]]  # each copy a loop nest over 16x16 tiles
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


def mma16_tiles(warps, warp_tile, group=(8, 8), k_tile=32, stages=3, swizzle=True, per_load=1, **options):
    """The schedule's arguments from a readable description: warps (rows, cols) per block, each
    computing warp_tile (rows, cols) of C; blocks launched in groups of group (rows, cols) blocks."""
    (wm, wn), (tm, tn), (gm, gn) = warps, warp_tile, group
    fm, fn = tm // 16, tn // 16  # 16x16 fragments per warp
    rows = [N // 16 // (gm * wm * fm), gm, wm, 1, fm]
    cols = [N // 16 // (gn * wn * fn), gn, wn, 1, fn]
    k = [N // k_tile, k_tile // 16 // per_load, per_load]
    check_factors(rows=(rows, N // 16), cols=(cols, N // 16), k=(k, N // 16))
    return dict(rows=rows, cols=cols, k=k, stages=stages, swizzle=swizzle, **options)


MMA16 = {
    "2x4 warps of 64x64 (block 128x256), k 32": mma16_tiles((2, 4), (64, 64)),
    "2x4 warps of 64x64, k 64": mma16_tiles((2, 4), (64, 64), k_tile=64),
    "2x4 warps of 64x64, k 32, 4 stages": mma16_tiles((2, 4), (64, 64), stages=4),
    "2x4 warps of 64x64, k 32, padded rows": mma16_tiles((2, 4), (64, 64), swizzle=False),
    "4x2 warps of 64x64 (block 256x128), k 32": mma16_tiles((4, 2), (64, 64)),
    "2x2 warps of 64x64 (block 128x128), k 32": mma16_tiles((2, 2), (64, 64)),
    "2x2 warps of 64x64, k 32, 4 stages": mma16_tiles((2, 2), (64, 64), stages=4),
    "2x2 warps of 64x64, k 64": mma16_tiles((2, 2), (64, 64), k_tile=64),
    "4x2 warps of 32x64 (block 128x128), k 32": mma16_tiles((4, 2), (32, 64)),
    "2x4 warps of 64x32 (block 128x128), k 32": mma16_tiles((2, 4), (64, 32)),
    "2x4 warps of 64x64, k 32, groups of 16x16": mma16_tiles((2, 4), (64, 64), group=(16, 16)),
    "2x4 warps of 64x32, k 32, 4 stages": mma16_tiles((2, 4), (64, 32), stages=4),
    "2x4 warps of 64x32, k 64": mma16_tiles((2, 4), (64, 32), k_tile=64),
    "2x2 warps of 64x64, k 64, 4 stages": mma16_tiles((2, 2), (64, 64), k_tile=64, stages=4),
    "4x4 warps of 32x64 (block 128x256), k 32": mma16_tiles((4, 4), (32, 64)),
}


MMA16_REFINE = {  # after MMA16: 2 x 2 warps of 64 x 64 (two blocks per SM) led it
    "2x2 warps of 64x64, k 64 (round 1's best)": mma16_tiles((2, 2), (64, 64), k_tile=64),
    "2x2 warps of 64x64, k 64, groups of 4x4": mma16_tiles((2, 2), (64, 64), k_tile=64, group=(4, 4)),
    "2x2 warps of 64x64, k 64, groups of 16x16": mma16_tiles((2, 2), (64, 64), k_tile=64, group=(16, 16)),
    "2x2 warps of 64x64, k 64, no groups (32x32)": mma16_tiles((2, 2), (64, 64), k_tile=64, group=(32, 32)),
    "2x2 warps of 64x64, k 64, 2 stages": mma16_tiles((2, 2), (64, 64), k_tile=64, stages=2),
    "2x2 warps of 64x64, k 64, 2 steps per load": mma16_tiles((2, 2), (64, 64), k_tile=64, per_load=2),
    "2x2 warps of 64x64, k 64, padded rows": mma16_tiles((2, 2), (64, 64), k_tile=64, swizzle=False),
    "2x2 warps of 64x64, k 32, 5 stages": mma16_tiles((2, 2), (64, 64), stages=5),
    "2x2 warps of 64x64, k 32, 6 stages": mma16_tiles((2, 2), (64, 64), stages=6),
    "2x2 warps of 64x64, k 32, 4 stages, groups of 4x4": mma16_tiles((2, 2), (64, 64), stages=4, group=(4, 4)),
    "1x2 warps of 64x64 (block 64x128), k 32, 4 stages": mma16_tiles((1, 2), (64, 64), stages=4),
    "2x1 warps of 64x64 (block 128x64), k 32, 4 stages": mma16_tiles((2, 1), (64, 64), stages=4),
    "1x2 warps of 64x64, k 64": mma16_tiles((1, 2), (64, 64), k_tile=64),
    "2x2 warps of 32x64 (block 64x128), k 64": mma16_tiles((2, 2), (32, 64), k_tile=64),
}


BEST = dict(warps=(2, 2), warp_tile=(64, 64), k_tile=64, group=(4, 4))  # MMA16_REFINE's best
SMALL = dict(BEST, k_tile=32, stages=4)  # 64 KB of shared memory: room for three blocks per SM
MMA16_EPILOGUE = {  # after MMA16_REFINE: the C epilogue, and fragment registers traded for a third block per SM
    "2x2 warps of 64x64, k 64, groups of 4x4 (round 2's best)": mma16_tiles(**BEST),
    "the same, C stored in pairs": mma16_tiles(**BEST, pairs=True),
    "the same, fragments not loaded ahead": mma16_tiles(**BEST, ahead=False),
    "the same, tile fetch issued after the loads (order 2,3,0,1,4)": mma16_tiles(**BEST, order=(2, 3, 0, 1, 4)),
    "k 32, 4 stages, fetch after the loads": mma16_tiles(**SMALL, order=(2, 3, 0, 1, 4)),
    "k 32, 4 stages, groups of 4x4": mma16_tiles(**SMALL),
    "k 32, 4 stages, 3 blocks/SM": mma16_tiles(**SMALL, blocks_per_sm=3),
    "k 32, 4 stages, not ahead, 3 blocks/SM": mma16_tiles(**SMALL, ahead=False, blocks_per_sm=3),
    "k 32, 4 stages, not ahead, 3 blocks/SM, pairs": mma16_tiles(**SMALL, ahead=False, blocks_per_sm=3, pairs=True),
    "k 64, 2 stages, not ahead, 3 blocks/SM": mma16_tiles(**dict(BEST, stages=2), ahead=False, blocks_per_sm=3),
    "k 32, 3 stages, not ahead, 3 blocks/SM": mma16_tiles(**dict(SMALL, stages=3), ahead=False, blocks_per_sm=3),
}
