"""Notebook 12's tensor-core kernels: the group's query heads as the rows of `mma.sync.m16n8k16`.

Why: Nsight Compute at 32 sequences of 8k keys (H200, `gpu/experiments/decode_profile.py`) shows
`decode_paged_wave` issuing 177 M instructions where cuDNN's kernel issues 38 M: about 92 a key a warp,
the fp32 multiply-adds of four heads' dot products, their shuffle sums, P V and the conversions. On
tensor cores a page of 16 keys costs a warp 24 mma:
- S = Q K^T: A is the group's query heads (rows 4-15 zero), B a page's K. The order of the dims inside a
  k-step is free (a dot product does not care), so a lane's 16 contiguous bytes of a key serve two k-steps,
  and Q is loaded in the same order.
- The online softmax runs on S's accumulator: lane (g, t) holds keys 2t, 2t + 1 of head g in each 8-key
  tile; a head's 4 lanes share its maximum by 2 shuffles.
- O^T = V^T P^T: P^T is the accumulator itself, packed to fp16 pairs; V^T comes from V's rows by
  `movmatrix.trans` (`decode_paged_mma`) or `ldmatrix.trans` (`decode_paged_mma_async`).
The 4 warps' states (m, l, O) merge in shared memory; one split writes O, more write (O_s, LSE_s) for
`merge_splits`. `decode_paged_mma_async` keeps each warp's next two pages in flight in shared memory by
cp.async instead of in registers (the PTX ISA's mma.sync, movmatrix, cp.async and ldmatrix)."""

from tvm.script import tirx as T

from helpers.decode import check_heads
from helpers.lessons.decoding import LOG2E, NEG, merge_splits

__all__ = ["MMA", "WARPS", "PAGE", "STAGES", "check_mma_shape", "attend", "decode_paged_mma", "attend_staged",
           "decode_paged_mma_async"]

MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
WARPS, PAGE = 4, 16
THREADS = 32 * WARPS


@T.macro(hygienic=False)
def page_into(kb, vb, tile):
    # K and V of the warp's page `tile`, if the split has it, into registers kb and vb: lane (g, t) takes keys g
    # and g + 8, 16 bytes at dims 32u + 8t, of both under one test, from the page's number read once
    if tile < tiles:
        pg = T.alloc_local((1,), "int32")
        pg[0] = table[b, sp * chunk // PAGE + tile]
        for ri in T.unroll(2):
            for u in T.unroll(4):
                if tile * PAGE + ri * 8 + g < n:
                    kb[T.Ramp(ri * 16 + u * 4, 1, 4)] = KV32[pg[0], 0, h, ri * 8 + g, T.Ramp(u * 16 + t * 4, 1, 4)]
                    vb[T.Ramp(ri * 16 + u * 4, 1, 4)] = KV32[pg[0], 1, h, ri * 8 + g, T.Ramp(u * 16 + t * 4, 1, 4)]
                else:  # past the split's end: zeros, so that P V adds 0 * 0
                    for q in T.unroll(4):
                        kb[ri * 16 + u * 4 + q] = T.uint32(0)
                        vb[ri * 16 + u * 4 + q] = T.uint32(0)


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
def attend(kc, vc, tile, scale):
    # (hygienic=False: its names, s, qa, m, KV32, sp, chunk..., are those where it is used, in decode_paged_mma)
    # one page of the warp: S = Q K^T on mma, the online softmax on the accumulator, O^T += V^T P^T on mma
    if tile < tiles:
        for x in T.unroll(8):
            s[x] = T.float32(0)
        for j in T.unroll(2):  # S = Q K^T, keys 8j..8j+7 of the page
            for kk in T.unroll(8):
                T.ptx[MMA](s[j * 4], s[j * 4 + 1], s[j * 4 + 2], s[j * 4 + 3],
                           qa[kk * 2], zero[0], qa[kk * 2 + 1], zero[0],
                           kc[j * 16 + kk // 2 * 4 + kk % 2 * 2], kc[j * 16 + kk // 2 * 4 + kk % 2 * 2 + 1],
                           s[j * 4], s[j * 4 + 1], s[j * 4 + 2], s[j * 4 + 3])
        softmax_on_accumulator(tile, scale)
        for x in T.unroll(32):  # V's 8x8 blocks transposed: lane (g, t) gets keys 2t, 2t + 1 of a dim
            T.ptx.movmatrix.sync.aligned.m8n8.trans.b16(vc[x], vc[x])
        for i in T.unroll(8):  # O^T += V^T P^T, dims of blocks 2i (rows 0-7) and 2i + 1 (rows 8-15)
            T.ptx[MMA](o[i * 4], o[i * 4 + 1], o[i * 4 + 2], o[i * 4 + 3],
                       vc[i * 2], vc[i * 2 + 1], vc[16 + i * 2], vc[16 + i * 2 + 1], pf[0], pf[1],
                       o[i * 4], o[i * 4 + 1], o[i * 4 + 2], o[i * 4 + 3])


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


def decode_paged_mma(B, HQ, HKV, D, pages, max_pages, splits, chunk, page=16):
    """`decode_paged_wave` with the group's query heads on tensor cores: each warp takes whole pages of the
    split, w, w + 4, ... for warp w; the next page's K and V load into registers while this one is used."""
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
            page_into(kr, vr, warp)  # kr, vr load the next page while kc, vc are used
            for it in T.serial((tiles + WARPS - 1) // WARPS):
                for x in T.unroll(32):
                    kc[x] = kr[x]
                    vc[x] = vr[x]
                page_into(kr, vr, it * WARPS + warp + WARPS)
                attend(kc, vc, it * WARPS + warp, scale)
            merge_warps()
        if splits > 1:
            merge_splits(O, Op, LSE, B, HQ, D, splits)
    return main



STAGES = 3  # a warp's pages in shared memory: the one scored, two in flight


@T.macro(hygienic=False)
def copy_chunk(st, which, r, c):
    # a lane's 16 bytes (chunk c) of row r of the page numbered pg[0], K or V, into stage st, XOR-swizzled
    T.ptx["cp.async.cg.shared.global"](KVs.ptr_to([warp, st, which, r, (c ^ r % 8) * 8]),
                                       KV.ptr_to([pg[0], which, h, r, c * 8]), 16)


@T.macro(hygienic=False)
def page_async(tile, st):
    # page `tile` of the warp's split, K and V, into stage st by cp.async (one group). TVM's cp.async is an asm
    # with a memory clobber, after which nvcc reloads what it read: the page's number is read into a register
    # once, and a whole page (all but the split's last) is copied without a test a row
    if tile < tiles:
        pg = T.alloc_local((1,), "int32")
        pg[0] = table[b, sp * chunk // PAGE + tile]
        if (tile + 1) * PAGE <= n:
            for i in T.unroll(8):
                for which in T.unroll(2):
                    copy_chunk(st, which, i * 2 + lane // 16, lane % 16)
        else:
            for i in T.unroll(8):
                r, c = T.meta_var(i * 2 + lane // 16), T.meta_var(lane % 16)
                for which in T.unroll(2):
                    if tile * PAGE + r < n:
                        copy_chunk(st, which, r, c)
                    else:  # past the split's end: zeros
                        KVs[warp, st, which, r, T.Ramp((c ^ r % 8) * 8, 1, 8)] = T.Broadcast(T.float16(0), 8)
    T.ptx["cp.async.commit_group"]()  # an empty group past the last page keeps the count


@T.macro(hygienic=False)
def attend_staged(tile, st, scale):
    # decode_mma's attend with K's and V's fragments from stage st by ldmatrix
    if tile < tiles:
        for x in T.unroll(8):
            s[x] = T.float32(0)
        for kk in T.unroll(8):  # S = Q K^T: one ldmatrix.x4 gives both 8-key tiles' B for k-step kk
            r, c = T.meta_var(lane // 16 * 8 + lane % 8), T.meta_var(kk * 2 + lane // 8 % 2)
            T.ptx.ldmatrix.sync.aligned.m8n8.x4.shared.b16(*[kf[x] for x in range(4)],
                                                            KVs.ptr_to([warp, st, 0, r, (c ^ r % 8) * 8]))
            for j in T.unroll(2):
                T.ptx[MMA](s[j * 4], s[j * 4 + 1], s[j * 4 + 2], s[j * 4 + 3], qa[kk * 2], zero[0], qa[kk * 2 + 1],
                           zero[0], kf[j * 2], kf[j * 2 + 1], s[j * 4], s[j * 4 + 1], s[j * 4 + 2], s[j * 4 + 3])
        softmax_on_accumulator(tile, scale)
        for i in T.unroll(8):  # O^T += V^T P^T, dims 16i..16i+15: V's rows transposed by ldmatrix.trans
            r, c = T.meta_var(lane // 16 * 8 + lane % 8), T.meta_var(i * 2 + lane // 8 % 2)
            T.ptx.ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16(vf[0], vf[1], vf[2], vf[3],
                                                                  KVs.ptr_to([warp, st, 1, r, (c ^ r % 8) * 8]))
            T.ptx[MMA](o[i * 4], o[i * 4 + 1], o[i * 4 + 2], o[i * 4 + 3], vf[0], vf[1], vf[2], vf[3], pf[0], pf[1],
                       o[i * 4], o[i * 4 + 1], o[i * 4 + 2], o[i * 4 + 3])


def decode_paged_mma_async(B, HQ, HKV, D, pages, max_pages, splits, chunk, page=16):
    """`decode_paged_mma` with each warp's pages in a ring of STAGES in shared memory (96 KiB a block),
    filled by cp.async two pages ahead and read back by ldmatrix: bytes in flight that hold no registers.
    A row's 16-byte chunks are stored XOR-swizzled (chunk c of row r at c ^ r % 8), so the 8 rows of an 8x8
    matrix fall on distinct banks."""
    heads, scale = check_mma_shape("decode_paged_mma_async", HQ, HKV, D, chunk, page), LOG2E / D ** 0.5

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
            pool = T.alloc_buffer((WARPS * STAGES * 2 * PAGE * D,), "float16", scope="shared.dyn", align=128)
            KVs = T.decl_buffer((WARPS, STAGES, 2, PAGE, D), "float16", data=pool.data, scope="shared.dyn")
            qa = T.alloc_local((16,), "uint32")  # Q's A fragments, 8 k-steps x (rows g, g + 8 zero)
            kf, vf, pf, zero = [T.alloc_local((n_,), "uint32") for n_ in (4, 4, 2, 1)]
            s = T.alloc_local((8,), "float32")  # S, two 8-key tiles: (head g, keys 2t, 2t + 1), rows g + 8
            o = T.alloc_local((32,), "float32")  # O^T, 8 tiles of 16 dims: (dims 16i + g (+ 8), heads 2t, 2t + 1)
            m, l, mn, alpha, a2 = [T.alloc_local((1,), "float32") for _ in range(5)]
            acc, tot, mx = [T.alloc_local((1,), "float32") for _ in range(3)]
            sm, sl = [T.alloc_buffer((WARPS, 8), "float32", scope="shared") for _ in range(2)]
            so = T.decl_buffer((WARPS, 8, D), "float32", data=pool.data, scope="shared.dyn")  # after the stages
            n = T.meta_var(T.min(chunk, T.max(lengths[b] - sp * chunk, 0)))  # this split's keys
            tiles = T.meta_var((n + PAGE - 1) // PAGE)
            zero[0] = T.uint32(0)
            for kk in T.unroll(8):  # k-step kk: dims 16kk + 2t (+ 1) and 16kk + 8 + 2t (+ 1), head g
                for e in T.unroll(2):
                    qa[kk * 2 + e] = T.if_then_else(g < heads, Q32[b, h * heads + T.min(g, heads - 1), kk * 8 + e * 4 + t],
                                                    T.uint32(0))
            init_warp_state()
            for p in T.unroll(STAGES - 1):  # the warp's first pages on their way
                page_async(p * WARPS + warp, p)
            for it in T.serial((tiles + WARPS - 1) // WARPS):
                page_async((it + STAGES - 1) * WARPS + warp, (it + STAGES - 1) % STAGES)
                T.ptx["cp.async.wait_group"](STAGES - 1)  # this page's group is in; the two after stay in flight
                T.cuda.warp_sync()  # and every lane's copies are seen by the warp
                attend_staged(it * WARPS + warp, it % STAGES, scale)
                T.cuda.warp_sync()  # the stage is read before a later page_async overwrites it
            T.cuda.cta_sync()  # every warp done with its stages: `so` reuses them (98.5 KB a block, not 115)
            share_warp_state()
            if t * 2 < heads:
                for i in T.unroll(8):
                    for r in T.unroll(2):
                        for e in T.unroll(2):
                            so[warp, t * 2 + e, i * 16 + r * 8 + g] = o[i * 4 + r * 2 + e]
            merge_shared()
        if splits > 1:
            merge_splits(O, Op, LSE, B, HQ, D, splits)
    return main
