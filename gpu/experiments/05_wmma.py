"""Explore WMMA tensor-core matmul schedules for notebook 05 (fp16 in, fp32 accumulate, fp32 C).

    PYTHONPATH=. python gpu/experiments/05_wmma.py          # on the H100: build, check, time
    PYTHONPATH=. python gpu/experiments/05_wmma.py --dry    # anywhere: only build every variant

C[i, j] = sum_k A[i, k] * B[j, k] (B stored N x K, the seed's layout: cuBLAS "transpose_b").
Each variant is built, run once on NaN-poisoned output, checked against torch's fp32 matmul of
the same fp16 inputs (TF32 off) on the GPU, then timed. One table at the end with % of cuBLAS
fp16 (which writes fp16 C; our kernels write fp32 C). A time guard skips the rest near 4 min.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import traceback

import numpy as np
import tvm
from tvm import s_tir
from tvm.script import tirx as T
from tvm.s_tir.tensor_intrin.cuda import get_wmma_intrin_group

import helpers

T0 = time.time()
BUDGET_S = 210.0
TOL = 1e-3


def matmul_module(M, N, K):
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((M, K), "float16"), B: T.Buffer((N, K), "float16"), C: T.Buffer((M, N), "float32")):
        T.func_attr({"tirx.noalias": True})
        for i, j, k in T.grid(M, N, K):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + T.Cast("float32", A[vi, vk]) * T.Cast("float32", B[vj, vk])

    return tvm.IRModule({"main": main})


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
    for ext, f, what in ((M, 16 * wm * fm, "block rows"), (N, 16 * wn * fn, "block cols"), (K, 16 * kt, "k tile")):
        helpers.require_divides(ext, f, what)
    sch = s_tir.Schedule(matmul_module(M, N, K))
    blk = sch.get_sblock("C")
    i, j, k = sch.get_loops(blk)
    i, ii = sch.split(i, [None, 16])
    j, ji = sch.split(j, [None, 16])
    k, ki = sch.split(k, [None, 16])
    sch.reorder(i, j, k, ii, ji, ki)
    mma = sch.blockize(ii)
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

    def to_shared(idx):
        s = sch.cache_read(mma, idx, scope)
        sch.compute_at(s, k0)
        f = sch.fuse(*sch.get_loops(s)[-2:])
        _, f1, f2, f3 = sch.split(f, [None, wm * wn, 32, vec])
        sch.bind(f1, "threadIdx.y")
        sch.bind(f2, "threadIdx.x")
        sch.vectorize(f3)
        if pad:
            sch.storage_align(s, 0, axis=-2, factor=32, offset=pad)
        if local_stage:
            sch.annotate(s, "tirx.manifest_shared_memory_local_stage", 1)
            sch.annotate(s, "double_buffer_scope", 0)
        return s

    to_shared(0)
    to_shared(1)
    Af = sch.cache_read(mma, 0, "wmma.matrix_a")
    Bf = sch.cache_read(mma, 1, "wmma.matrix_b")
    sch.compute_at(Af, k1)
    sch.compute_at(Bf, k1)
    Cf = sch.cache_write(mma, 0, "wmma.accumulator")
    sch.reverse_compute_at(Cf, ty)

    def split16(b):
        x, y = sch.get_loops(b)[-2:]
        x0, x1 = sch.split(x, [None, 16])
        y0, y1 = sch.split(y, [None, 16])
        sch.reorder(x0, y0, x1, y1)
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
    for ext, f, what in ((M, 16 * wm * fm, "block rows"), (N, 16 * wn * fn, "block cols"), (K, 16 * kt, "k tile")):
        helpers.require_divides(ext, f, what)
    sch = s_tir.Schedule(matmul_module(M, N, K))
    blk = sch.get_sblock("C")
    i, j, k = sch.get_loops(blk)
    i, ii = sch.split(i, [None, 16])
    j, ji = sch.split(j, [None, 16])
    k, ki = sch.split(k, [None, 16])
    sch.reorder(i, j, k, ii, ji, ki)
    outer = sch.blockize(ii)
    i0, i1, i2 = sch.split(i, [None, wm, fm])
    j0, j1, j2 = sch.split(j, [None, wn, fn])
    k0, k1 = sch.split(k, [None, kt])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.bind(sch.fuse(i0, j0), "blockIdx.x")
    ty = sch.fuse(i1, j1)
    sch.bind(ty, "threadIdx.y")

    for idx in (0, 1):
        s = sch.cache_read(outer, idx, scope)
        sch.compute_at(s, k0)
        f = sch.fuse(*sch.get_loops(s)[-2:])
        _, f1, f2, f3 = sch.split(f, [None, wm * wn, 32, vec])
        sch.bind(f1, "threadIdx.y")
        sch.bind(f2, "threadIdx.x")
        sch.vectorize(f3)
        if pad:
            sch.storage_align(s, 0, axis=-2, factor=32, offset=pad)
    Aw = sch.cache_read(outer, 0, "warp")
    Bw = sch.cache_read(outer, 1, "warp")
    sch.compute_at(Aw, k1)
    sch.compute_at(Bw, k1)
    Cw = sch.cache_write(outer, 0, "warp")
    sch.reverse_compute_at(Cw, ty)

    def tile16(b):
        x, y = sch.get_loops(b)[-2:]
        x0, x1 = sch.split(x, [None, 16])
        y0, y1 = sch.split(y, [None, 16])
        sch.reorder(x0, y0, x1, y1)
        return x1

    la, lb, ls = tile16(Aw), tile16(Bw), tile16(Cw)
    init = sch.decompose_reduction(outer, k0)
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


def variants():
    """(name, builder kwargs or callable, async pass config). Ordered by priority."""
    V = []

    def add(name, fn=None, cfg_async=False, **kw):
        V.append((name, fn or (lambda M, N, K, kw=kw: wmma(M, N, K, **kw)), cfg_async))

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
    V.append(("dlight MatmulTensorization", dlight_tensorization, False))
    # 9. ldmatrix + mma.sync instead of WMMA (exploratory: check the warp buffers became registers)
    for name, kw in [("mma 2x4 warps of 4x4, k32, pad8", {}),
                     ("mma 2x4 warps of 4x4, k32, pad8, 3 st async", dict(stages=3, async_=True)),
                     ("mma 2x4 warps of 4x4, k32, pad8, 3 st async + dbuf", dict(stages=3, async_=True, inner_pipe=True))]:
        V.append((name, lambda M, N, K, kw=kw: mma(M, N, K, **kw), bool(kw.get("async_"))))
    return V


# ------------------------------------------------------------------ running


class Inputs:
    def __init__(self, M, N, K, dev):
        import torch

        rng = np.random.default_rng(0)
        self.a = rng.uniform(-1, 1, (M, K)).astype("float16")
        self.b = rng.uniform(-1, 1, (N, K)).astype("float16")
        self.args = [tvm.runtime.tensor(self.a, dev), tvm.runtime.tensor(self.b, dev),
                     tvm.runtime.tensor(np.zeros((M, N), "float32"), dev)]
        self.nan = np.full((M, N), np.nan, "float32")
        torch.backends.cuda.matmul.allow_tf32 = False
        a = torch.from_numpy(self.a).cuda().float()
        b = torch.from_numpy(self.b).cuda().float()
        self.ref = (a @ b.T).double()
        self.ref_norm = float(self.ref.norm())

    def error(self):
        import torch

        try:
            out = torch.from_dlpack(self.args[2]).double()
        except Exception:
            out = torch.from_numpy(self.args[2].numpy()).cuda().double()
        return float((out - self.ref).norm()) / self.ref_norm


def build(sch, target, cfg_async):
    cfg = {"tirx.use_async_copy": True} if cfg_async else {}
    with tvm.transform.PassContext(config=cfg):
        return helpers.build(sch, target)


def main(argv=None, variant_list=variants, title="05_wmma"):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dry", action="store_true", help="only build every variant (no GPU needed)")
    ap.add_argument("--only", default="", help="substring filter on variant names")
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--trace", action="store_true", help="print tracebacks of failing variants")
    args = ap.parse_args(argv)
    dry = args.dry or not helpers.gpu_available()
    target = helpers.make_target() if not dry else helpers.listing_target()
    print(f"TVM {tvm.__version__}, target {target}, {'DRY (build only)' if dry else 'live'}", flush=True)
    M = N = K = args.size
    flops = 2.0 * M * N * K
    dev = None if dry else helpers.device()
    cublas_ms = None
    if not dry:
        cublas_ms = helpers.cublas_time(M, N, K, "float16", transpose_b=True, repeat=10)
        print(f"cuBLAS fp16 (fp16 C) NT {M}^3: {cublas_ms:.4f} ms = {flops / cublas_ms / 1e9:.1f} TFLOP/s", flush=True)
        nn = helpers.cublas_time(M, N, K, "float16", transpose_b=False, repeat=10)
        print(f"cuBLAS fp16 (fp16 C) NN {M}^3: {nn:.4f} ms = {flops / nn / 1e9:.1f} TFLOP/s", flush=True)
        inp = Inputs(M, N, K, dev)
    rows = []
    schedules = {}
    for name, fn, cfg_async in variant_list():
        if args.only and args.only not in name:
            continue
        if time.time() - T0 > BUDGET_S:
            rows.append((name, None, None, "skipped (time budget)"))
            continue
        t = time.time()
        try:
            sch = fn(M, N, K)
            ex = build(sch, target, cfg_async)
            schedules[name] = (sch, cfg_async)
            if dry:
                src = ex.mod.imports[0].inspect_source()
                note = f"built {time.time() - t:.1f}s, mma_sync x{src.count('mma_sync(')}"
                note += ", cp.async" if "cp_async" in src else ""
                note += f", ldmatrix x{src.count('ldmatrix.sync')}, mma.sync x{src.count('mma.sync.aligned')}" if "ldmatrix" in src else ""
                rows.append((name, None, None, note))
                print(f"{name}: {note}", flush=True)
                continue
            inp.args[2].copyfrom(inp.nan)
            ex.mod["main"](*inp.args)
            dev.sync()
            err = inp.error()
            if not err <= TOL:
                rows.append((name, None, err, "WRONG"))
                print(f"{name}: WRONG rel err {err:.2e}", flush=True)
                continue
            times = helpers.time_function(ex.mod, dev, inp.args, repeat=7, warmup=2, min_repeat_ms=15)
            ms = statistics.median(times)
            rows.append((name, ms, err, ""))
            print(f"{name}: {ms:.4f} ms  {flops / ms / 1e9:.1f} TFLOP/s  err {err:.1e}  ({time.time() - t:.1f}s)",
                  flush=True)
        except Exception as e:  # report, never crash
            msg = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:160] if str(e).strip() else ''}"
            rows.append((name, None, None, "FAILED " + msg))
            print(f"{name}: FAILED {msg}", flush=True)
            if args.trace:
                traceback.print_exc()

    ok = sorted([r for r in rows if r[1] is not None], key=lambda r: r[1])
    if helpers.nvcc_path() and ok and time.time() - T0 < BUDGET_S + 15:
        print("\nptxas (sm_90) of the best variants:")
        for r in ok[:4]:
            try:
                sch, cfg_async = schedules[r[0]]
                with tvm.transform.PassContext(config={"tirx.use_async_copy": True} if cfg_async else {}):
                    for rep in helpers.ptxas_report(sch, target):
                        print(f"  {r[0]}: {rep}")
            except Exception as e:
                print(f"  {r[0]}: ptxas failed: {type(e).__name__}")

    print(f"\n=== {title}: {M}x{N}x{K}, fp16 A (MxK), fp16 B (NxK), fp32 C; tol {TOL:g} vs torch fp32; "
          f"{'DRY' if dry else tvm.cuda(0).device_name}; TVM {tvm.__version__} ===")
    print(f"{'variant':<58} {'ms':>8} {'TFLOP/s':>8} {'rel err':>8} {'% cuBLAS':>8}  note")
    if cublas_ms:
        print(f"{'cuBLAS fp16 (torch, NT, fp16 C)':<58} {cublas_ms:8.4f} {flops / cublas_ms / 1e9:8.1f} "
              f"{'':>8} {100.0:7.1f}%")
    for name, ms, err, note in rows:
        ms_s = f"{ms:8.4f}" if ms else f"{'-':>8}"
        tf = f"{flops / ms / 1e9:8.1f}" if ms else f"{'-':>8}"
        er = f"{err:8.1e}" if err is not None else f"{'-':>8}"
        pc = f"{100 * cublas_ms / ms:7.1f}%" if ms and cublas_ms else f"{'-':>8}"
        print(f"{name:<58} {ms_s} {tf} {er} {pc}  {note}")
    print(f"total {time.time() - T0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
