"""The group's query heads on tensor cores: 12's paged decode kernel with QK^T and PV on mma.sync.

`decode_profile.py` (H200, 2026-11-29) put the lesson's kernel beside cuDNN's SDPA at 32x8k: the same grid
(256 blocks of 128 threads) and occupancy, but 177 M instructions against 37.6 M, issue slots 68% busy
against 18%, DRAM at 83% of peak against 92%. A key costs a warp about 92 instructions: 32 fp32 FMAs of
the 4 heads' scores a lane, the 16-lane shuffle sums of each, 32 FMAs of P V, the conversions of K and V
to fp32. The kernel is bound by issuing instructions, not by its loads; SDPA's warps wait on loads.

Here each warp takes whole pages (16 keys) of the split, pages w, w + 4, ... for warp w of 4:
- S = Q K^T on `mma.sync.m16n8k16`: A is the group's 4 query heads (rows 4-15 zero), B is the page's K,
  loaded from global memory straight into registers. The order of the 128 dims inside a k-step is free
  (a dot product does not care), so a thread loads 16 contiguous bytes of a key and uses them as its
  fragment of two k-steps; Q is loaded in the same order. 16 mma a page.
- The online softmax on the accumulator: a lane holds 2 keys of its head (g = lane / 4) per 8-key tile,
  the 4 lanes of a head share the maximum by 2 shuffles.
- O^T = V^T P^T on mma.sync: P^T (keys x heads) is the score accumulator itself, packed to fp16 pairs;
  V^T comes from V's rows as loaded by `movmatrix.trans` (an 8x8 transpose across the warp's registers,
  PTX ISA 9.7.16.5.17), with the dims again in the loads' order. 8 mma a page.
- The next page's K and V load while this one is scored (as `decode_paged_wave`).
At the end the 4 warps' states (m, l, O) are merged in shared memory; one split writes O, more write
(O_s, LSE_s) for 12's `merge_splits`.

Checked against the float64 reference, then timed in 9 rounds alternating with SDPA, beside the lesson's
`decode_paged_wave`, at the sweep's shapes where the H200 trails SDPA and a few where it does not.

What it found (H200, 2026-11-29, `results/decode_mma*.nvidia-h200.txt`): right at the first build (2e-04,
as the lesson's), and 3.0x fewer instructions at 32x8k (58.4 M against 177.4 M; issue slots 26% busy
against 68%; DRAM at 90.2% of peak against 83%, SDPA's 91.9%: `results/decode_profile.mma.nvidia-h200.txt`).
It holds 218 registers, so 2 blocks an SM: planned for 2 an SM it is ahead of the lesson's kernel or within a
point of it at every sweep shape, and closes most of the one-split gap (SDPA's time over ours, `sweep`):
32x8k 0.897 -> 0.972, 128x1k 0.888 -> 0.959, 32x1k 0.959 -> 0.995, 8x32k 0.949 -> 0.982; planned for 3 an
SM it loses 8-12 points where the plan has more than one split. Neither loading in place (157 registers,
3 an SM) nor two pages ahead in registers (228) reads faster (`ahead`: 0.954-0.966 at 32x8k): with its
warps waiting on loads (long scoreboard 4.6 cycles an instruction, as SDPA's 5.0), what is left is how
many bytes a warp keeps in flight without registers (cp.async or TMA into shared memory, as SDPA does).

    python gpu/experiments/decode_mma.py [BxN ...]      (N in k)
    python gpu/experiments/decode_mma.py ahead [BxN ...] (copy, in place, two in place)
    python gpu/experiments/decode_mma.py sweep          (12's sweep shapes: the lesson's and mma at 2 an SM)
    python gpu/experiments/decode_mma.py build          (no GPU: registers, and the mma and movmatrix in the CUDA)
"""

import sys

from tvm.script import tirx as T

import helpers
from helpers import decode, decode_steps, kernels
from helpers.decode import HKV, HQ, D, check_heads
from helpers.lessons.decoding import LOG2E, NEG, merge_splits

SHAPES = [(32, 8192), (128, 1024), (8, 32768), (32, 1024), (8, 8192), (1, 32768)]
MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
WARPS, PAGE = 4, 16
THREADS = 32 * WARPS


@T.macro
def load_page(r, KV32, table, b, h, first_page, tile, n, g, t, which):
    # the page's 16 keys of K (which = 0) or V (1): lane (g, t) takes keys g and g + 8, 16 bytes at dims 32u + 8t
    for ri in T.unroll(2):
        for u in T.unroll(4):
            if tile * PAGE + ri * 8 + g < n:
                r[T.Ramp(ri * 16 + u * 4, 1, 4)] = KV32[table[b, first_page + tile], which, h, ri * 8 + g,
                                                        T.Ramp(u * 16 + t * 4, 1, 4)]
            else:  # past the split's end: zeros, so that P V adds 0 * 0
                for q in T.unroll(4):
                    r[ri * 16 + u * 4 + q] = T.uint32(0)


@T.macro(hygienic=False)
def page_into(kb, vb, tile):
    # K and V of the warp's page `tile`, if the split has it, into registers kb and vb
    if tile < tiles:
        load_page(kb, KV32, table, b, h, sp * chunk // PAGE, tile, n, g, t, 0)
        load_page(vb, KV32, table, b, h, sp * chunk // PAGE, tile, n, g, t, 1)


@T.macro(hygienic=False)
def softmax_on_accumulator(tile, scale):
    # the online softmax on S's accumulator (lane (g, t): head g, keys 2t, 2t + 1 of each 8-key tile); P^T
    # packed as mma's B (pf); O^T's columns (heads 2t, 2t + 1) rescaled
    for j in T.unroll(2):
        for e in T.unroll(2):
            s[j * 4 + e] = T.if_then_else(tile * PAGE + j * 8 + t * 2 + e < n, s[j * 4 + e] * T.float32(scale),
                                          T.min_value("float32"))
    mn[0] = T.cuda.warp_max(T.max(T.max(s[0], s[1]), T.max(s[4], s[5])), 4)  # the head's 4 lanes
    mn[0] = T.max(mn[0], m[0])
    alpha[0] = T.exp2(m[0] - mn[0])
    m[0] = mn[0]
    for j in T.unroll(2):
        for e in T.unroll(2):
            s[j * 4 + e] = T.exp2(s[j * 4 + e] - mn[0])
    l[0] = l[0] * alpha[0] + s[0] + s[1] + s[4] + s[5]
    for j in T.unroll(2):  # P^T as mma's B: keys 2t, 2t + 1 (+ 8j) of head g, packed
        T.ptx.cvt.rn.f16x2.f32(pf[j], s[j * 4 + 1], s[j * 4])
    for e in T.unroll(2):  # O^T's columns are heads 2t, 2t + 1: their alphas
        a2[0] = T.cuda.__shfl_sync(T.uint32(0xFFFFFFFF), alpha[0], (t * 2 + e) * 4 % 32, 32)
        for i in T.unroll(8):
            o[i * 4 + e] = o[i * 4 + e] * a2[0]
            o[i * 4 + 2 + e] = o[i * 4 + 2 + e] * a2[0]


@T.macro(hygienic=False)
def attend(kc, vc, tile, ahead, scale):
    # (hygienic=False: its names, s, qa, m, KV32, sp, chunk..., are those where it is used, in decode_paged_mma)
    # one page of the warp: S on mma, the online softmax, O^T += V^T P^T on mma; with `ahead`, the K and
    # V of page tile + ahead load into kc and vc as soon as each is used
    if tile < tiles:
        for x in T.unroll(8):
            s[x] = T.float32(0)
        for j in T.unroll(2):  # S = Q K^T, keys 8j..8j+7 of the page
            for kk in T.unroll(8):
                T.ptx[MMA](s[j * 4], s[j * 4 + 1], s[j * 4 + 2], s[j * 4 + 3],
                           qa[kk * 2], zero[0], qa[kk * 2 + 1], zero[0],
                           kc[j * 16 + kk // 2 * 4 + kk % 2 * 2], kc[j * 16 + kk // 2 * 4 + kk % 2 * 2 + 1],
                           s[j * 4], s[j * 4 + 1], s[j * 4 + 2], s[j * 4 + 3])
        if ahead > 0 and tile + ahead < tiles:  # K's registers are free: the K of the page `ahead` on
            load_page(kc, KV32, table, b, h, sp * chunk // PAGE, tile + ahead, n, g, t, 0)
        softmax_on_accumulator(tile, scale)
        for x in T.unroll(32):  # V's 8x8 blocks transposed: lane (g, t) gets keys 2t, 2t + 1 of a dim
            T.ptx.movmatrix.sync.aligned.m8n8.trans.b16(vc[x], vc[x])
        for i in T.unroll(8):  # O^T += V^T P^T, dims of blocks 2i (rows 0-7) and 2i + 1 (rows 8-15)
            T.ptx[MMA](o[i * 4], o[i * 4 + 1], o[i * 4 + 2], o[i * 4 + 3],
                       vc[i * 2], vc[i * 2 + 1], vc[16 + i * 2], vc[16 + i * 2 + 1], pf[0], pf[1],
                       o[i * 4], o[i * 4 + 1], o[i * 4 + 2], o[i * 4 + 3])
        if ahead > 0 and tile + ahead < tiles:  # and its V
            load_page(vc, KV32, table, b, h, sp * chunk // PAGE, tile + ahead, n, g, t, 1)


@T.macro(hygienic=False)
def init_warp_state():
    # the warp's running maximum, sum (a lane's share of its head's) and O^T, before any key
    m[0] = T.float32(NEG)
    l[0] = T.float32(0)
    for x in T.unroll(32):
        o[x] = T.float32(0)


@T.macro(hygienic=False)
def share_warp_state():
    # the head's sum over its 4 lanes; m and l of head g into shared memory for merge_shared
    l[0] = T.cuda.warp_sum(l[0], 4)
    if t == 0:
        sm[warp, g] = m[0]
        sl[warp, g] = l[0]


@T.macro(hygienic=False)
def merge_warps():
    # the 4 warps' states (m, l, O^T) through shared memory (O^T's dims in the loads' order), then merge_shared
    share_warp_state()
    if t * 2 < heads:  # block x = 4u + q holds dims 32u + 8 (g // 2) + 2q + g % 2 in its row g
        for i in T.unroll(8):
            for r in T.unroll(2):
                for e in T.unroll(2):
                    so[warp, t * 2 + e, (i * 2 + r) // 4 * 32 + g // 2 * 8 + (i * 2 + r) % 4 * 2 + g % 2] = o[i * 4 + r * 2 + e]
    merge_shared()


@T.macro(hygienic=False)
def merge_shared():
    # the 4 warps' states in shared memory (sm, sl, so) merged: O for one split, else (O_s, LSE_s)
    T.cuda.cta_sync()
    for jj in T.unroll(heads * D // THREADS):
        hg, d = T.meta_var((jj * THREADS + tid) // D), T.meta_var((jj * THREADS + tid) % D)
        mx[0] = sm[0, hg]
        for w in T.unroll(1, WARPS):
            mx[0] = T.max(mx[0], sm[w, hg])
        acc[0] = T.float32(0)
        tot[0] = T.float32(0)
        for w in T.unroll(WARPS):
            tot[0] = tot[0] + sl[w, hg] * T.exp2(sm[w, hg] - mx[0])
            acc[0] = acc[0] + so[w, hg, d] * T.exp2(sm[w, hg] - mx[0])
        if splits == 1:
            O[b, h * heads + hg, d] = T.Cast("float16", acc[0] / tot[0])
        else:
            Op[b, sp, h * heads + hg, d] = T.if_then_else(tot[0] > 0, acc[0] / tot[0], T.float32(0))
            if d == 0:
                LSE[b, sp, h * heads + hg] = T.if_then_else(tot[0] > 0, mx[0] + T.log2(tot[0]), T.float32(NEG))


def check_mma_shape(name, HQ, HKV, D, chunk, page):
    """The query heads a KV head (`check_heads`), where the tensor-core kernels' layout holds: pages of 16 keys
    (a page is two 8-key mma tiles), splits of whole pages, d = 128, at most 8 heads a KV head (mma's rows)."""
    heads = check_heads(HQ, HKV, D)
    if page != PAGE or chunk % PAGE or D != 128 or heads > 8:
        raise ValueError(f"{name} takes pages of {PAGE} keys, splits of whole pages, d = 128 and at most 8 query "
                         f"heads a KV head; got page {page}, chunk {chunk}, d {D}, {heads} heads")
    return heads


def decode_paged_mma(B, HQ, HKV, D, pages, max_pages, splits, chunk, page=16, registers="copy"):
    """`registers`, how a warp's next pages load: "copy", into a second set of registers while the first
    is used, then copied over (as `decode_paged_wave`); "in place", one set, the next page's K loading into
    K's registers once S is made and its V into V's once P V is done (64 registers fewer: 3 blocks an SM,
    not 2); "two in place": two sets used in turn, each refilled in place with the page two ahead (twice
    the bytes in flight of "in place", the registers of "copy")."""
    heads, scale = check_mma_shape("decode_paged_mma", HQ, HKV, D, chunk, page), LOG2E / D ** 0.5

    @T.prim_func
    def main(Q: T.Buffer((B, HQ, D), "float16"), KV: T.Buffer((pages, 2, HKV, page, D), "float16"),
             table: T.Buffer((B, max_pages), "int32"), lengths: T.Buffer((B,), "int32"),
             Op: T.Buffer((B, splits, HQ, D), "float32"),
             LSE: T.Buffer((B, splits, HQ), "float32"), O: T.Buffer((B, HQ, D), "float16")):
        with T.attr(0, "tirx.device_entry", True):
            b, h, sp = T.cta_id([B, HKV, splits])
            tid = T.thread_id([THREADS])
            warp, lane = T.meta_var(tid // 32), T.meta_var(tid % 32)
            g, t = T.meta_var(lane // 4), T.meta_var(lane % 4)
            Q32 = T.decl_buffer((B, HQ, D // 2), "uint32", data=Q.data)
            KV32 = T.decl_buffer((pages, 2, HKV, page, D // 2), "uint32", data=KV.data)
            qa = T.alloc_local((16,), "uint32")  # Q's A fragments, 8 k-steps x (rows g, g + 8 zero)
            kr, vr, kc, vc = [T.alloc_local((32,), "uint32") for _ in range(4)]  # loading, in use
            zero, pf = T.alloc_local((1,), "uint32"), T.alloc_local((2,), "uint32")
            s = T.alloc_local((8,), "float32")  # S, two 8-key tiles: (head g, keys 2t, 2t + 1), rows g + 8
            o = T.alloc_local((32,), "float32")  # O^T, 8 tiles of 16 dims: (dims of g, heads 2t, 2t + 1)
            m, l, mn, alpha, a2 = [T.alloc_local((1,), "float32") for _ in range(5)]
            acc, tot, mx = [T.alloc_local((1,), "float32") for _ in range(3)]
            sm, sl = [T.alloc_buffer((WARPS, 8), "float32", scope="shared") for _ in range(2)]
            so = T.alloc_buffer((WARPS, 8, D), "float32", scope="shared")
            n = T.meta_var(T.min(chunk, T.max(lengths[b] - sp * chunk, 0)))  # this split's keys
            tiles = T.meta_var((n + PAGE - 1) // PAGE)
            zero[0] = T.uint32(0)
            for kk in T.unroll(8):  # k-step kk = 2u + hh: dims 32u + 8t + 4hh + (0, 1) and (2, 3)
                for e in T.unroll(2):
                    qa[kk * 2 + e] = T.if_then_else(g < heads, Q32[b, h * heads + T.min(g, heads - 1),
                                                                  kk // 2 * 16 + t * 4 + kk % 2 * 2 + e], T.uint32(0))
            init_warp_state()
            if registers == "copy":  # kr, vr load the next page while kc, vc are used
                page_into(kr, vr, warp)
                for it in T.serial((tiles + WARPS - 1) // WARPS):
                    for x in T.unroll(32):
                        kc[x] = kr[x]
                        vc[x] = vr[x]
                    page_into(kr, vr, it * WARPS + warp + WARPS)
                    attend(kc, vc, it * WARPS + warp, 0, scale)
            elif registers == "in place":  # one set: the next page loads into it as it is used
                page_into(kc, vc, warp)
                for it in T.serial((tiles + WARPS - 1) // WARPS):
                    attend(kc, vc, it * WARPS + warp, WARPS, scale)
            else:  # "two in place": two sets, each refilled with the page two ahead as it is used
                page_into(kc, vc, warp)
                page_into(kr, vr, WARPS + warp)
                for it in T.serial((tiles + 2 * WARPS - 1) // (2 * WARPS)):
                    attend(kc, vc, it * 2 * WARPS + warp, 2 * WARPS, scale)
                    attend(kr, vr, it * 2 * WARPS + WARPS + warp, 2 * WARPS, scale)
            merge_warps()
        if splits > 1:
            merge_splits(O, Op, LSE, B, HQ, D, splits)
    return main


def decode_paged_mma_in_place(*shape):
    return decode_paged_mma(*shape, registers="in place")


def decode_paged_mma_two(*shape):
    return decode_paged_mma(*shape, registers="two in place")


def build_report():
    """(No GPU.) ptxas' registers of each kernel at 32x8k, and the mma and movmatrix in its CUDA."""
    import re

    for name, factory in (("lesson (decode_paged_wave)", decode_steps.decode_paged_wave), ("mma", decode_paged_mma),
                          ("mma, loads in place", decode_paged_mma_in_place), ("mma, two in place", decode_paged_mma_two)):
        k = factory(32, HQ, HKV, D, *decode.pool_size([8192] * 32), 1, 8192)
        ex = kernels.build(k, "sm_90a", "tirx")
        src = ex.mod.imports[0].inspect_source()
        regs = ", ".join(f"{r.registers} registers, {r.spill_stores} bytes spilled"
                         for r in helpers.ptxas_report(ex, "sm_90a"))
        print(f"{name}: {regs}; mma {len(re.findall('mma.sync', src))}, movmatrix {len(re.findall('movmatrix', src))}")


VARIANTS = (("lesson's", decode_steps.decode_paged_wave, 3), ("mma", decode_paged_mma, 3),
            ("mma, planned for 2 an SM", decode_paged_mma, 2), ("mma, loads in place", decode_paged_mma_in_place, 3),
            ("mma, two in place, 2 an SM", decode_paged_mma_two, 2))
SWEEP_VARIANTS = (VARIANTS[0], VARIANTS[2])


def main(shapes, variants=VARIANTS):
    from decode_balance import build_planned, cases
    from decode_one_split import against_sdpa

    walk = cases(shapes)
    lesson, dev, target, spec = next(walk)
    for b, n, q, kv, table, lengths, ref, rounds, sdpa in walk:
        for name, factory, per_sm in variants:
            ex, splits = build_planned(lesson, factory, per_sm, b, n, spec, target)
            args = [q, kv, table, lengths, *decode.split_outputs(b, splits)]
            print(f"    {name}, {b * HKV * splits} blocks, {splits} splits: "
                  + against_sdpa(ex, dev, args, ref, rounds, sdpa), flush=True)


if __name__ == "__main__":
    from decode_balance import parse

    if sys.argv[1:2] == ["build"]:
        build_report()
    elif sys.argv[1:2] == ["ahead"]:  # the three ways of loading ahead, at the shapes where SDPA leads
        main([parse(a) for a in sys.argv[2:]] or SHAPES[:4], (VARIANTS[0], *VARIANTS[2:]))
    elif sys.argv[1:2] == ["sweep"]:  # 12's sweep: the lesson's kernel and the mma one planned for 2 an SM
        main(decode.sweep_points(), SWEEP_VARIANTS)
    else:
        main([parse(a) for a in sys.argv[1:]] or SHAPES)
