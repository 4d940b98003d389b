"""WMMA tensor-core matmul schedules for notebook 05 (fp16 in, fp32 accumulate, fp32 C), explored broadly.

    python gpu/experiments/05_tensor_cores.py levers            # on a GPU: build, check, time
    python gpu/experiments/05_tensor_cores.py levers --dry      # anywhere: only build every variant
    python gpu/experiments/05_tensor_cores.py pipeline [--dry]

levers: each lever of notebook 05's sections 10 and 11 in turn, from the seed's schedule: warp
and block tiles, padded shared rows, the k tile, the width of the global loads, software
pipelines (stages, cp.async, fragment double buffering, early fragment loads), other tiles with
the best pipeline, TVM's own tensor-core rule (dlight), and ldmatrix + mma.sync instead of WMMA.
pipeline: around the best of `levers`: the k tile of 64 with the early-fragment pipeline at
several warp tiles and depths, k 128, wider padding, the notebook's steps at k 64, and
ldmatrix + mma.sync with the same pipelines. Its best is the kernel notebook 05 ends with.

C[i, j] = sum_k A[i, k] * B[j, k] at 4096^3 (B stored N x K, the seed's layout: cuBLAS
"transpose_b"). Each variant is built, run once on a NaN-poisoned output, checked against torch's
fp32 matmul of the same fp16 inputs (TF32 off) on the GPU, then timed. One table at the end with
% of cuBLAS fp16 (which writes fp16 C; these kernels write fp32 C). A time guard skips the
remaining variants past ~3.5 minutes.
"""

from __future__ import annotations

import functools
import sys
import time

import tvm
from tvm import s_tir
from tvm.s_tir.tensor_intrin.cuda import get_wmma_intrin_group

import helpers
from schedules import blockize_fragments, tile_copy
from study import Study, cli
from variants import MatmulCheck, ONLY, Variant, dry_run, matmul_table, measure_matmuls, only, print_ptxas

SHAPE = (4096, 4096, 4096)
ASYNC = {"tirx.use_async_copy": True}  # cp.async needs this compiler option besides the annotation


# ------------------------------------------------------------------ the schedules


def matmul_module(M, N, K) -> tvm.IRModule:
    """C (fp32) = A (fp16, M x K) times B (fp16, stored N x K) transposed, sums in fp32; its kernel
    is named main_kernel, as in the recorded results."""
    func = helpers.matmul_workload(M, N, K, "float16", "float32", transpose_b=True)
    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


def check_tiles(M, N, K, warps, frags, kt):
    """Refuse tiles that do not divide the matrix: a block of warps x frags fragments, a k tile of kt."""
    (wm, wn), (fm, fn) = warps, frags
    for ext, f, what in ((M, 16 * wm * fm, "block rows"), (N, 16 * wn * fn, "block cols"), (K, 16 * kt, "k tile")):
        helpers.require_divides(ext, f, what)


def fetch_to_shared(sch, mma, k0, scope, warps, vec, pad):
    """Stage the A and B tiles of each k tile in `scope`, fetched cooperatively by all `warps` warps,
    `vec` halves per thread and load (8 = 16 bytes); each row padded by `pad` halves. Returns the
    two copy blocks."""
    copies = []
    for idx in (0, 1):
        s = sch.cache_read(mma, idx, scope)
        sch.compute_at(s, k0)
        f = sch.fuse(*sch.get_loops(s)[-2:])
        _, f1, f2, f3 = sch.split(f, [None, warps, 32, vec])
        sch.bind(f1, "threadIdx.y")
        sch.bind(f2, "threadIdx.x")
        sch.vectorize(f3)
        if pad:
            sch.storage_align(s, 0, axis=-2, factor=32, offset=pad)
        copies.append(s)
    return copies


def cache_fragments(sch, mma, k1, warp, a_scope, b_scope, c_scope):
    """The A and B fragments each step of `k1` multiplies, loaded there, and the accumulators,
    written back once per `warp` after the whole k loop."""
    a = sch.cache_read(mma, 0, a_scope)
    b = sch.cache_read(mma, 1, b_scope)
    sch.compute_at(a, k1)
    sch.compute_at(b, k1)
    c = sch.cache_write(mma, 0, c_scope)
    sch.reverse_compute_at(c, warp)
    return a, b, c


def wmma(M, N, K, warps=(4, 4), frags=(2, 2), kt=4, kin=2, vec=8, pad=0, stages=1, async_=False,
         inner_pipe=False, style="plain", scope="shared", local_stage=False, unroll=False):
    """The seed's schedule, parameterised.

    warps: warps per block (rows, cols); frags: 16x16 accumulator fragments per warp (rows, cols);
    kt: k-tile in 16-wide fragments (the shared tile is 16*kt wide); kin: k-fragments loaded per
    inner step; vec: elements per thread per global->shared load (8 = 16 bytes); pad: halves
    added to each shared row (storage_align); stages: software-pipeline depth of the shared
    tiles (1 = none); async_: cp.async for the global->shared copies; inner_pipe: double-buffer
    the fragment loads; style: 'plain' or 'cutlass' (next tile's first fragments early);
    local_stage: stage global->shared through registers (dlight's double_buffer_scope way).
    """
    wm, wn = warps
    fm, fn = frags
    check_tiles(M, N, K, warps, frags, kt)
    sch = s_tir.Schedule(matmul_module(M, N, K))
    mma, i, j, k = blockize_fragments(sch, sch.get_sblock("C"), 16, 16, 16)
    i0, i1, i2 = sch.split(i, [None, wm, fm])
    j0, j1, j2 = sch.split(j, [None, wn, fn])
    k0, k1, k2 = sch.split(k, [None, kt // kin, kin])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2, k2)
    bx = sch.fuse(i0, j0)
    sch.bind(bx, "blockIdx.x")
    ty = sch.fuse(i1, j1)
    sch.bind(ty, "threadIdx.y")
    lib = get_wmma_intrin_group(load_scope=scope, store_scope="global", in_dtype="float16",
                                out_dtype="float32", trans_b=True)

    for s in fetch_to_shared(sch, mma, k0, scope, wm * wn, vec, pad):
        if local_stage:
            sch.annotate(s, "tirx.manifest_shared_memory_local_stage", 1)
            sch.annotate(s, "double_buffer_scope", 0)
    Af, Bf, Cf = cache_fragments(sch, mma, k1, ty, "wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")

    def split16(b):
        x0, y0, x1 = tile_copy(sch, b, 16, 16)
        if unroll:
            sch.unroll(x0)
            sch.unroll(y0)
        return x1

    la, lb, ls = split16(Af), split16(Bf), split16(Cf)
    init = sch.decompose_reduction(mma, k0)
    sch.tensorize(la, lib["load_a"])
    sch.tensorize(lb, lib["load_b"])
    sch.tensorize(init, lib["init"])
    sch.tensorize(mma, lib["compute"])
    sch.tensorize(ls, lib["store"])
    if inner_pipe:
        sch.annotate(k1, "software_pipeline_stage", [0, 0, 1])
        sch.annotate(k1, "software_pipeline_order", [0, 1, 2])
    if stages > 1:
        n_copy = 4 if local_stage else 2  # local staging splits each copy in two statements
        tail = 3 if inner_pipe else 1  # an inner pipeline becomes prologue, body, epilogue
        if inner_pipe and style == "cutlass":
            st = [0] * n_copy + [stages - 2, stages - 1, stages - 1]
            order = list(range(n_copy)) + [n_copy + 1, n_copy, n_copy + 2]
        else:
            st = [0] * n_copy + [stages - 1] * tail
            order = list(range(n_copy + tail))
        sch.annotate(k0, "software_pipeline_stage", st)
        sch.annotate(k0, "software_pipeline_order", order)
        if async_:
            sch.annotate(k0, "software_pipeline_async_stages", [0])
    return sch


def mma(M, N, K, warps=(2, 4), frags=(4, 4), kt=2, vec=8, pad=8, stages=1, async_=False, inner_pipe=False,
        style="plain", scope="shared.dyn"):
    """The same tiling with the PTX-level intrinsics: ldmatrix into per-thread registers ("warp"
    scope, laid out as the mma.sync m16n8k16 instruction wants) and mma.sync, instead of WMMA."""
    from tvm.s_tir.tensor_intrin import cuda as tc

    wm, wn = warps
    fm, fn = frags
    check_tiles(M, N, K, warps, frags, kt)
    sch = s_tir.Schedule(matmul_module(M, N, K))
    blk = sch.get_sblock("C")
    outer, i, j, k = blockize_fragments(sch, blk, 16, 16, 16)
    i0, i1, i2 = sch.split(i, [None, wm, fm])
    j0, j1, j2 = sch.split(j, [None, wn, fn])
    k0, k1 = sch.split(k, [None, kt])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.bind(sch.fuse(i0, j0), "blockIdx.x")
    ty = sch.fuse(i1, j1)
    sch.bind(ty, "threadIdx.y")

    fetch_to_shared(sch, outer, k0, scope, wm * wn, vec, pad)
    Aw, Bw, Cw = cache_fragments(sch, outer, k1, ty, "warp", "warp", "warp")

    la, lb, ls = (tile_copy(sch, b, 16, 16)[2] for b in (Aw, Bw, Cw))
    sch.decompose_reduction(outer, k0)
    index_map = lambda i, j: (i // 16, j // 16, *tc.shared_16x16_to_ldmatrix_32x8_layout(i % 16, j % 16))  # noqa: E731
    sch.transform_layout(Aw, ("write", 0), index_map)
    sch.transform_layout(Bw, ("write", 0), index_map)
    sch.transform_layout(Cw, ("read", 0), index_map)
    dyn = scope == "shared.dyn"
    sch.tensorize(la, tc.LDMATRIX_f16_A_DYN_INTRIN if dyn else tc.LDMATRIX_f16_A_INTRIN)
    sch.tensorize(lb, tc.LDMATRIX_f16_B_TRANS_DYN_INTRIN if dyn else tc.LDMATRIX_f16_B_TRANS_INTRIN)
    sch.tensorize(sch.get_loops(blk)[-3], tc.MMA_f16f16f32_TRANS_B_INTRIN)
    sch.tensorize(sch.get_loops(sch.get_sblock("C_init"))[-2], tc.MMA_fill_16x16_f32_INTRIN)
    sch.tensorize(ls, tc.MMA_store_16x16_f32_global_INTRIN)
    if inner_pipe:
        sch.annotate(k1, "software_pipeline_stage", [0, 0, 1])
        sch.annotate(k1, "software_pipeline_order", [0, 1, 2])
    if stages > 1:
        if not inner_pipe:
            st, order = [0, 0, stages - 1], [0, 1, 2]
        elif style == "cutlass":
            st, order = [0, 0, stages - 2, stages - 1, stages - 1], [0, 1, 3, 2, 4]
        else:
            st, order = [0, 0] + [stages - 1] * 3, [0, 1, 2, 3, 4]
        sch.annotate(k0, "software_pipeline_stage", st)
        sch.annotate(k0, "software_pipeline_order", order)
        if async_:
            sch.annotate(k0, "software_pipeline_async_stages", [0])
    return sch


def dlight_tensorization(M, N, K):
    """TVM's own default tensor-core rule (WMMA, 2-stage, register-staged), for reference."""
    from tvm.s_tir import dlight as dl
    from tvm.s_tir.dlight.gpu.matmul import MatmulTensorization

    mod = matmul_module(M, N, K)
    target = helpers.make_target() if helpers.gpu_available() else helpers.listing_target()
    with target:
        mod = dl.ApplyDefaultSchedule(MatmulTensorization())(mod)
    return mod


# ------------------------------------------------------------------ the variants

BEST = dict(warps=(2, 4), frags=(4, 4), kt=2, kin=1, vec=8, pad=8, scope="shared.dyn")


def variant(name, fn=wmma, cfg_async=False, **kw) -> Variant:
    return Variant(name, functools.partial(fn, *SHAPE, **kw), SHAPE, ASYNC if cfg_async else {})


def lever_variants() -> list[Variant]:
    """Ordered by priority: the time guard cuts from the end."""
    V = []

    def add(name, cfg_async=False, **kw):
        V.append(variant(name, cfg_async=cfg_async, **kw))

    # 1. the seed, and the recorded 2x4 warps of 4x2 fragments
    add("seed 4x4 warps of 2x2, k64(2x2)", warps=(4, 4), frags=(2, 2), kt=4, kin=2)
    add("2x4 warps of 4x2, k64(2x2)", warps=(2, 4), frags=(4, 2), kt=4, kin=2)
    # 2. warp tile / block tile grid (no padding, no pipelining), k-tile 32, one k-fragment per step
    for (wm, wn), (fm, fn) in [((2, 2), (2, 2)), ((2, 2), (4, 4)), ((2, 4), (4, 2)), ((2, 4), (4, 4)),
                               ((4, 2), (4, 4)), ((4, 4), (2, 2)), ((4, 4), (2, 4)), ((2, 4), (2, 4)),
                               ((2, 2), (4, 8)), ((4, 4), (4, 4)), ((1, 4), (8, 4)), ((2, 2), (8, 4))]:
        add(f"{wm}x{wn} warps of {fm}x{fn}, k32", warps=(wm, wn), frags=(fm, fn), kt=2, kin=1)
    # 3. padding against bank conflicts on the fragment loads
    for pad in (8, 16):
        add(f"2x4 warps of 4x4, k32, pad{pad}", warps=(2, 4), frags=(4, 4), kt=2, kin=1, pad=pad)
        add(f"2x2 warps of 4x4, k32, pad{pad}", warps=(2, 2), frags=(4, 4), kt=2, kin=1, pad=pad)
        if pad == 8:
            add(f"seed, pad{pad}", warps=(4, 4), frags=(2, 2), kt=4, kin=2, pad=pad)
    # 4. k-tile
    for kt in (1, 4):
        add(f"2x4 warps of 4x4, k{16 * kt}, pad8", warps=(2, 4), frags=(4, 4), kt=kt, kin=1, pad=8)
    add("2x4 warps of 4x4, k64(kin2), pad8", warps=(2, 4), frags=(4, 4), kt=4, kin=2, pad=8)
    # 5. vector width of the cooperative global->shared fetch
    for vec in (4, 2, 1):
        add(f"2x4 warps of 4x4, k32, pad8, vec{vec}", warps=(2, 4), frags=(4, 4), kt=2, kin=1, pad=8, vec=vec)
    # 6. software pipelining (shared.dyn: more than 48 KB of shared memory)
    b = dict(BEST)
    add("best, shared.dyn (no pipeline)", **b)
    for stages in (2, 3, 4):
        if stages == 2:
            add(f"best, {stages} stages sync", **b, stages=stages)
        add(f"best, {stages} stages async", cfg_async=True, **b, stages=stages, async_=True)
        add(f"best, {stages} stages async + frag dbuf", cfg_async=True, **b, stages=stages, async_=True, inner_pipe=True)
        add(f"best, {stages} stages async + frag dbuf cutlass", cfg_async=True, **b, stages=stages, async_=True,
            inner_pipe=True, style="cutlass")
    add("best, frag dbuf only", **b, inner_pipe=True)
    add("best, 2 stages register-staged (dlight way)", **b, stages=2, local_stage=True, inner_pipe=True)
    add("best, 3 stages async + frag dbuf, unrolled", cfg_async=True, **b, stages=3, async_=True, inner_pipe=True,
        unroll=True)
    # 7. other tiles with the best pipeline
    for (wm, wn), (fm, fn), kt in [((2, 2), (4, 4), 2), ((4, 2), (4, 4), 2), ((2, 4), (4, 4), 4),
                                   ((2, 4), (4, 2), 2), ((4, 4), (2, 4), 2), ((2, 2), (4, 8), 2),
                                   ((4, 4), (4, 4), 2), ((2, 4), (4, 4), 1)]:
        for stages in (3, 4):
            add(f"{wm}x{wn} warps of {fm}x{fn}, k{16 * kt}, pad8, {stages} st async + dbuf", cfg_async=True,
                warps=(wm, wn), frags=(fm, fn), kt=kt, kin=1, pad=8, vec=8, scope="shared.dyn",
                stages=stages, async_=True, inner_pipe=True)
    # 8. TVM's own default tensor-core rule
    V.append(variant("dlight MatmulTensorization", dlight_tensorization))
    # 9. ldmatrix + mma.sync instead of WMMA (exploratory: check the warp buffers became registers)
    for name, kw in [("mma 2x4 warps of 4x4, k32, pad8", {}),
                     ("mma 2x4 warps of 4x4, k32, pad8, 3 st async", dict(stages=3, async_=True)),
                     ("mma 2x4 warps of 4x4, k32, pad8, 3 st async + dbuf", dict(stages=3, async_=True, inner_pipe=True))]:
        V.append(variant(name, mma, bool(kw.get("async_")), **kw))
    return V


def pipeline_variants() -> list[Variant]:
    V = []

    def add(name, cfg_async=True, **kw):
        V.append(variant(name, cfg_async=cfg_async, **kw))

    base = dict(vec=8, pad=8, scope="shared.dyn", async_=True, inner_pipe=True, style="cutlass")
    # the best of `levers` again (noise), then k 64 with the early-fragment pipeline
    for st in (3, 4):
        add(f"2x4 warps of 4x4, k32, {st} st early-frag (r1 best)", **base, warps=(2, 4), frags=(4, 4), kt=2, kin=1,
            stages=st)
    for (wm, wn), (fm, fn) in [((2, 4), (4, 4)), ((2, 2), (4, 4)), ((4, 2), (4, 4)), ((2, 4), (4, 2)),
                               ((4, 4), (2, 4)), ((4, 2), (2, 4))]:
        for st in (3, 4):
            add(f"{wm}x{wn} warps of {fm}x{fn}, k64, {st} st early-frag", **base, warps=(wm, wn), frags=(fm, fn),
                kt=4, kin=1, stages=st)
    for (wm, wn), (fm, fn) in [((2, 4), (4, 4)), ((2, 2), (4, 4))]:
        for st in (3, 4):
            add(f"{wm}x{wn} warps of {fm}x{fn}, k64 (2 per step), {st} st early-frag", **base, warps=(wm, wn),
                frags=(fm, fn), kt=4, kin=2, stages=st)
    for (wm, wn), (fm, fn) in [((2, 2), (4, 4)), ((4, 2), (4, 4))]:
        for st in (3, 4, 5):
            add(f"{wm}x{wn} warps of {fm}x{fn}, k32, {st} st early-frag", **base, warps=(wm, wn), frags=(fm, fn),
                kt=2, kin=1, stages=st)
    add("2x2 warps of 4x4, k128, 3 st early-frag", **base, warps=(2, 2), frags=(4, 4), kt=8, kin=1, stages=3)
    add("2x2 warps of 4x4, k128 (2 per step), 3 st early-frag", **base, warps=(2, 2), frags=(4, 4), kt=8, kin=2,
        stages=3)
    for pad in (16, 24):  # 3 stages: 4 stages of padded 384 x (64 + pad) tiles exceed 227 KB
        b = dict(base, pad=pad)
        add(f"2x4 warps of 4x4, k64, pad{pad}, 3 st early-frag", **b, warps=(2, 4), frags=(4, 4), kt=4, kin=1,
            stages=3)
    # the notebook's steps at k 64: pipelines without / with fragment double buffering
    t64 = dict(warps=(2, 4), frags=(4, 4), kt=4, kin=1, vec=8, pad=8, scope="shared.dyn")
    add("2x4 warps of 4x4, k64, shared.dyn, no pipeline", cfg_async=False, **t64)
    add("2x4 warps of 4x4, k64, 2 st sync", cfg_async=False, **t64, stages=2)
    for st in (2, 3, 4):
        add(f"2x4 warps of 4x4, k64, {st} st async", **t64, stages=st, async_=True)
    add("2x4 warps of 4x4, k64, 3 st async + frag dbuf", **t64, stages=3, async_=True, inner_pipe=True)
    add("2x4 warps of 4x4, k64, 3 st sync early-frag", cfg_async=False, **t64, stages=3, inner_pipe=True,
        style="cutlass")
    # without padding, with the best pipeline (what padding is worth at the end)
    add("2x4 warps of 4x4, k64, pad0, 4 st early-frag", **dict(base, pad=0), warps=(2, 4), frags=(4, 4), kt=4,
        kin=1, stages=4)
    # ldmatrix + mma.sync with the same pipelines
    for kt, st in ((4, 3), (4, 4), (2, 4)):
        V.append(variant(f"mma 2x4 warps of 4x4, k{16 * kt}, {st} st early-frag", mma, True, kt=kt, stages=st,
                         async_=True, inner_pipe=True, style="cutlass"))
    V.append(variant("dlight MatmulTensorization", dlight_tensorization))
    return V


# ------------------------------------------------------------------ running


def measure(variants: list[Variant]) -> int:
    deadline = time.time() + 210
    flops = 2.0 * SHAPE[0] * SHAPE[1] * SHAPE[2]
    nt = helpers.cublas_time(*SHAPE, "float16", transpose_b=True, repeat=10)
    nn = helpers.cublas_time(*SHAPE, "float16", transpose_b=False, repeat=10)
    print(f"cuBLAS fp16 (fp16 C) NT {SHAPE[0]}^3: {nt:.4f} ms = {flops / nt / 1e9:.1f} TFLOP/s", flush=True)
    print(f"cuBLAS fp16 (fp16 C) NN {SHAPE[0]}^3: {nn:.4f} ms = {flops / nn / 1e9:.1f} TFLOP/s", flush=True)
    results = measure_matmuls(
        variants, lambda shape: MatmulCheck(shape, "float16", b_transposed=True, precision="float32"), 1e-3,
        lambda _: dict(repeat=7, warmup=2, min_repeat_ms=15), deadline)
    print_ptxas(results, variants, 4)
    print()
    matmul_table(results, {SHAPE: nt}, f"{'x'.join(map(str, SHAPE))}, fp16 A (M x K), fp16 B (N x K), fp32 C; "
                 f"tolerance 1e-3 against torch fp32; {tvm.cuda(0).device_name}; TVM {tvm.__version__}; "
                 "% of cuBLAS fp16 NT (fp16 C)")
    return 0


def levers(args) -> int:
    variants = only(lever_variants(), args.only)
    return dry_run(variants) if args.dry else measure(variants)


def pipeline(args) -> int:
    variants = only(pipeline_variants(), args.only)
    return dry_run(variants) if args.dry else measure(variants)


STUDIES = {
    "levers": Study(levers, "notebook 05's levers one at a time: warp tiles, padding, k tile, load width, "
                    "pipelines, other tiles, dlight, mma.sync", arguments=(ONLY,)),
    "pipeline": Study(pipeline, "around the best of levers: k 64 with early fragment loads, at several tiles and "
                      "depths", arguments=(ONLY,)),
}

if __name__ == "__main__":
    sys.exit(cli(__file__, __doc__, STUDIES))
