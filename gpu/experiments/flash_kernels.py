"""FlashAttention kernels on mma.sync (sm_80+) for gpu/experiments/10_attention.py: the exploration's
own copies, which its logs were made with. Q, K, V and O are (batch * heads, sequence, head dim) fp16."""

from tvm.script import tirx as T

LOG2E = 1.4426950408889634
MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"


@T.macro
def load_async(K, V, Ks, Vs, bh, j, st, tid, threads, BC, CH):
    """K and V tile j into stage st by cp.async, 16 bytes per copy, swizzled; one commit group."""
    for i in T.unroll(BC * CH // threads):
        r = T.meta_var((i * threads + tid) // CH)
        c = T.meta_var((i * threads + tid) % CH)
        T.ptx["cp.async.cg.shared.global"](Ks.ptr_to([st, r, (c ^ r % 8) * 8]), K.ptr_to([bh, j * BC + r, c * 8]), 16)
        T.ptx["cp.async.cg.shared.global"](Vs.ptr_to([st, r, (c ^ r % 8) * 8]), V.ptr_to([bh, j * BC + r, c * 8]), 16)
    T.ptx["cp.async.commit_group"]()


def flash_mma(BH, N, D, warps=4, BC=64, causal=False, pipelined=True):
    BR = 16 * warps
    threads = 32 * warps
    CH = D // 8  # 16-byte chunks per row
    scale = LOG2E / D ** 0.5
    NT = BC // 8   # n tiles of S
    KD = D // 16   # k steps of QK^T
    DT = D // 8    # n tiles of O
    KC = BC // 16  # k steps of PV
    stages = 2 if pipelined else 1

    @T.prim_func
    def main(Q: T.Buffer((BH, N, D), "float16"), K: T.Buffer((BH, N, D), "float16"),
             V: T.Buffer((BH, N, D), "float16"), O: T.Buffer((BH, N, D), "float16")):
        T.device_entry()
        bx0, bh = T.cta_id([N // BR, BH])
        bx = T.meta_var(N // BR - 1 - bx0 if causal else bx0)
        NJ = T.meta_var(((bx + 1) * BR + BC - 1) // BC if causal else N // BC)
        tid = T.thread_id([threads])
        pool = T.alloc_buffer(((BR + 2 * stages * BC) * D,), "float16", scope="shared.dyn", align=128)
        Qs = T.decl_buffer((BR, D), "float16", data=pool.data, elem_offset=0, scope="shared.dyn")
        Ks = T.decl_buffer((stages, BC, D), "float16", data=pool.data, elem_offset=BR * D, scope="shared.dyn")
        Vs = T.decl_buffer((stages, BC, D), "float16", data=pool.data, elem_offset=(BR + stages * BC) * D, scope="shared.dyn")
        qf = T.alloc_local((KD * 4,), "uint32")
        kf = T.alloc_local((4,), "uint32")
        pf = T.alloc_local((4,), "uint32")
        s = T.alloc_local((NT * 4,), "float32")
        o = T.alloc_local((DT * 4,), "float32")
        m = T.alloc_local((2,), "float32")
        l = T.alloc_local((2,), "float32")
        mx = T.alloc_local((2,), "float32")
        alpha = T.alloc_local((2,), "float32")
        warp = T.meta_var(tid // 32)
        lane = T.meta_var(tid % 32)
        if pipelined:
            load_async(K, V, Ks, Vs, bh, 0, 0, tid, threads, BC, CH)
        # Q tile: 16-byte chunks, swizzled: chunk c of row r at c ^ (r % 8)
        for i in T.unroll(BR * CH // threads):
            r = T.meta_var((i * threads + tid) // CH)
            c = T.meta_var((i * threads + tid) % CH)
            Qs[r, T.Ramp((c ^ r % 8) * 8, 1, 8)] = Q[bh, bx * BR + r, T.Ramp(c * 8, 1, 8)]
        for i in T.unroll(DT * 4):
            o[i] = T.float32(0)
        for i in T.unroll(2):
            m[i] = T.float32(-1e30)
            l[i] = T.float32(0)
        T.cuda.cta_sync()
        for kk in T.unroll(KD):
            r = T.meta_var(warp * 16 + lane % 16)
            c = T.meta_var(kk * 2 + lane // 16)
            T.ptx.ldmatrix.sync.aligned.m8n8.x4.shared.b16(qf[kk * 4], qf[kk * 4 + 1], qf[kk * 4 + 2], qf[kk * 4 + 3],
                                                            Qs.ptr_to([r, (c ^ r % 8) * 8]))
        for j in T.serial(NJ):
            if pipelined:
                if j + 1 < NJ:
                    load_async(K, V, Ks, Vs, bh, j + 1, (j + 1) % 2, tid, threads, BC, CH)
                else:
                    T.ptx["cp.async.commit_group"]()
                T.ptx["cp.async.wait_group"](1)
            else:
                for i in T.unroll(BC * CH // threads):
                    r = T.meta_var((i * threads + tid) // CH)
                    c = T.meta_var((i * threads + tid) % CH)
                    Ks[0, r, T.Ramp((c ^ r % 8) * 8, 1, 8)] = K[bh, j * BC + r, T.Ramp(c * 8, 1, 8)]
                    Vs[0, r, T.Ramp((c ^ r % 8) * 8, 1, 8)] = V[bh, j * BC + r, T.Ramp(c * 8, 1, 8)]
            T.cuda.cta_sync()
            st = T.meta_var(j % 2 if pipelined else 0)
            # S = Q K^T
            for i in T.unroll(NT * 4):
                s[i] = T.float32(0)
            for kk in T.unroll(KD):
                for nt2 in T.unroll(NT // 2):
                    r = T.meta_var(nt2 * 16 + lane // 16 * 8 + lane % 8)
                    c = T.meta_var(kk * 2 + lane // 8 % 2)
                    T.ptx.ldmatrix.sync.aligned.m8n8.x4.shared.b16(kf[0], kf[1], kf[2], kf[3],
                                                                    Ks.ptr_to([st, r, (c ^ r % 8) * 8]))
                    for h in T.unroll(2):
                        nt = T.meta_var(nt2 * 2 + h)
                        T.ptx[MMA](s[nt * 4], s[nt * 4 + 1], s[nt * 4 + 2], s[nt * 4 + 3],
                                   qf[kk * 4], qf[kk * 4 + 1], qf[kk * 4 + 2], qf[kk * 4 + 3],
                                   kf[h * 2], kf[h * 2 + 1],
                                   s[nt * 4], s[nt * 4 + 1], s[nt * 4 + 2], s[nt * 4 + 3])
            if causal:
                if j * BC + BC > bx * BR + warp * 16:  # a tile that crosses this warp's diagonal
                    for nt in T.unroll(NT):
                        for h in T.unroll(2):
                            for e in T.unroll(2):
                                if j * BC + nt * 8 + lane % 4 * 2 + e > bx * BR + warp * 16 + h * 8 + lane // 4:
                                    s[nt * 4 + h * 2 + e] = T.min_value("float32")
            # online softmax, rows lane/4 (h=0) and lane/4 + 8 (h=1)
            for h in T.unroll(2):
                mx[h] = m[h]
                for nt in T.unroll(NT):
                    mx[h] = T.max(mx[h], T.max(s[nt * 4 + h * 2], s[nt * 4 + h * 2 + 1]) * T.float32(scale))
                mx[h] = T.cuda.warp_max(mx[h], 4)
                alpha[h] = T.exp2(m[h] - mx[h])
                m[h] = mx[h]
                l[h] = l[h] * alpha[h]
                for nt in T.unroll(NT):
                    for e in T.unroll(2):
                        s[nt * 4 + h * 2 + e] = T.exp2(s[nt * 4 + h * 2 + e] * T.float32(scale) - mx[h])
                        l[h] = l[h] + s[nt * 4 + h * 2 + e]
                for dt in T.unroll(DT):
                    for e in T.unroll(2):
                        o[dt * 4 + h * 2 + e] = o[dt * 4 + h * 2 + e] * alpha[h]
            # O += P V
            for kc in T.unroll(KC):
                for h in T.unroll(2):
                    for g in T.unroll(2):
                        T.ptx.cvt.rn.f16x2.f32(pf[h * 2 + g], s[(kc * 2 + h) * 4 + g * 2 + 1], s[(kc * 2 + h) * 4 + g * 2])
                for dt2 in T.unroll(DT // 2):
                    r = T.meta_var(kc * 16 + lane // 8 % 2 * 8 + lane % 8)
                    c = T.meta_var(dt2 * 2 + lane // 16)
                    T.ptx.ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16(kf[0], kf[1], kf[2], kf[3],
                                                                          Vs.ptr_to([st, r, (c ^ r % 8) * 8]))
                    for h in T.unroll(2):
                        dt = T.meta_var(dt2 * 2 + h)
                        T.ptx[MMA](o[dt * 4], o[dt * 4 + 1], o[dt * 4 + 2], o[dt * 4 + 3],
                                   pf[0], pf[1], pf[2], pf[3], kf[h * 2], kf[h * 2 + 1],
                                   o[dt * 4], o[dt * 4 + 1], o[dt * 4 + 2], o[dt * 4 + 3])
            T.cuda.cta_sync()
        for h in T.unroll(2):
            l[h] = T.cuda.warp_sum(l[h], 4)
            for dt in T.unroll(DT):
                O[bh, bx * BR + warp * 16 + h * 8 + lane // 4, T.Ramp(dt * 8 + lane % 4 * 2, 1, 2)] = T.Cast(
                    "float16x2", o[T.Ramp(dt * 4 + h * 2, 1, 2)] / T.Broadcast(l[h], 2))

    return main



# --- Hopper: TMA + wgmma, a producer warpgroup and two consumer warpgroups (FlashAttention-3's plan) ---
TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
SWIZZLE_128B, L2_PROMOTION_256B = 3, 2
PRODUCER_REGISTERS, CONSUMER_REGISTERS = 40, 232


def tma_options():
    return dict(descriptor_dtype="float16", rank=2, swizzle=SWIZZLE_128B, l2_promotion=L2_PROMOTION_256B)


@T.macro
def tma_tile(dst, tmap, row, bar, boxes, nbytes):
    """One tile of `boxes` boxes of 64 columns, rows from `row`, into `dst` (boxes, rows, 64); the
    mbarrier `bar` learns to expect `nbytes`."""
    T.ptx.mbarrier.arrive.expect_tx.shared.b64(bar, T.uint32(nbytes))
    for b in T.unroll(boxes):
        T.ptx[TMA_LOAD](dst(b), T.address_of(tmap), b * 64, row, bar)


def flash_wgmma(BH, N, D, causal=False, BC=128, stages=2, pingpong=False):
    BR = 128
    boxes = D // 64
    NT = BC // 8
    DT = D // 8
    scale = LOG2E / D ** 0.5
    S = stages
    q_bytes, kv_bytes = BR * D * 2, BC * D * 2
    bars = (BR * D + 2 * S * BC * D) * 2  # byte offset of the barriers
    smem = bars + (1 + 3 * S) * 8
    WGMMA_S = f"wgmma.mma_async.sync.aligned.m64n{BC}k16.f32.f16.f16"
    WGMMA_O = f"wgmma.mma_async.sync.aligned.m64n{D}k16.f32.f16.f16"

    @T.prim_func
    def main(Q: T.Buffer((BH, N, D), "float16"), K: T.Buffer((BH, N, D), "float16"),
             V: T.Buffer((BH, N, D), "float16"), O: T.Buffer((BH, N, D), "float16")):
        Q_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
        T.tensormap_encode_tiled(Q_map, Q.data, D, BH * N, D * 2, 64, BR, 1, 1, **tma_options())
        K_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
        T.tensormap_encode_tiled(K_map, K.data, D, BH * N, D * 2, 64, BC, 1, 1, **tma_options())
        V_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
        T.tensormap_encode_tiled(V_map, V.data, D, BH * N, D * 2, 64, BC, 1, 1, **tma_options())
        T.device_entry()
        bx0, bh = T.cta_id([N // BR, BH])
        tid = T.thread_id([384])
        bx = T.meta_var(N // BR - 1 - bx0 if causal else bx0)
        NJ = T.meta_var(((bx + 1) * BR + BC - 1) // BC if causal else N // BC)
        pool = T.alloc_buffer((smem,), "uint8", scope="shared.dyn", align=1024)
        Qs = T.decl_buffer((boxes, BR, 64), "float16", data=pool.data, elem_offset=0, scope="shared.dyn")
        Ks = T.decl_buffer((S, boxes, BC, 64), "float16", data=pool.data, elem_offset=BR * D, scope="shared.dyn")
        Vs = T.decl_buffer((S, boxes, BC, 64), "float16", data=pool.data, elem_offset=BR * D + S * BC * D,
                           scope="shared.dyn")
        q_full = T.decl_buffer((1,), "uint64", data=pool.data, elem_offset=bars // 8, scope="shared.dyn")
        k_full = T.decl_buffer((S,), "uint64", data=pool.data, elem_offset=bars // 8 + 1, scope="shared.dyn")
        v_full = T.decl_buffer((S,), "uint64", data=pool.data, elem_offset=bars // 8 + 1 + S, scope="shared.dyn")
        empty = T.decl_buffer((S,), "uint64", data=pool.data, elem_offset=bars // 8 + 1 + 2 * S, scope="shared.dyn")
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(q_full.ptr_to([0]), T.uint32(1))
            for s in T.unroll(S):
                T.ptx.mbarrier.init.shared.b64(k_full.ptr_to([s]), T.uint32(1))
                T.ptx.mbarrier.init.shared.b64(v_full.ptr_to([s]), T.uint32(1))
                T.ptx.mbarrier.init.shared.b64(empty.ptr_to([s]), T.uint32(2))
            T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cta_sync()
        if tid < 128:
            T.ptx["setmaxnreg.dec.sync.aligned.u32"](PRODUCER_REGISTERS)
            if tid == 0:
                tma_tile(lambda b: Qs.ptr_to([b, 0, 0]), Q_map, bh * N + bx * BR, q_full.ptr_to([0]), boxes, q_bytes)
                for j in T.serial(NJ):
                    T.cuda.mbarrier_wait(empty.ptr_to([j % S]), (j // S) % 2 ^ 1)
                    tma_tile(lambda b: Ks.ptr_to([j % S, b, 0, 0]), K_map, bh * N + j * BC, k_full.ptr_to([j % S]),
                             boxes, kv_bytes)
                    tma_tile(lambda b: Vs.ptr_to([j % S, b, 0, 0]), V_map, bh * N + j * BC, v_full.ptr_to([j % S]),
                             boxes, kv_bytes)
        else:
            T.ptx["setmaxnreg.inc.sync.aligned.u32"](CONSUMER_REGISTERS)
            wg = T.meta_var(tid // 128 - 1)
            t = T.meta_var(tid % 128)
            sacc = T.alloc_local((BC // 2,), "float32")
            oacc = T.alloc_local((D // 2,), "float32")
            pf = T.alloc_local((BC // 4,), "uint32")
            desc_a = T.alloc_local((1,), "uint64")
            desc_b = T.alloc_local((1,), "uint64")
            m = T.alloc_local((2,), "float32")
            l = T.alloc_local((2,), "float32")
            mx = T.alloc_local((2,), "float32")
            alpha = T.alloc_local((2,), "float32")
            for i in T.unroll(D // 2):
                oacc[i] = T.float32(0)
            for h in T.unroll(2):
                m[h] = T.float32(-1e30)
                l[h] = T.float32(0)
            T.cuda.mbarrier_wait(q_full.ptr_to([0]), 0)
            if pingpong and wg == 1:
                T.ptx.bar.arrive(T.uint32(8), T.uint32(256))
            for j in T.serial(NJ):
                T.cuda.mbarrier_wait(k_full.ptr_to([j % S]), (j // S) % 2)
                if pingpong:
                    T.ptx.bar.sync(T.uint32(8 + wg), T.uint32(256))
                T.ptx.wgmma.fence.sync.aligned()
                for kk in T.unroll(D // 16):
                    T.cuda.wgmma.encode_matrix_descriptor(T.address_of(desc_a[0]), Qs.ptr_to([kk // 4, wg * 64, kk % 4 * 16]),
                                                          1, 64, SWIZZLE_128B)
                    T.cuda.wgmma.encode_matrix_descriptor(T.address_of(desc_b[0]), Ks.ptr_to([j % S, kk // 4, 0, kk % 4 * 16]),
                                                          1, 64, SWIZZLE_128B)
                    T.ptx[WGMMA_S](*[sacc[i] for i in range(BC // 2)], desc_a[0], desc_b[0], kk > 0, 1, 1, 0, 0)
                T.ptx.wgmma.commit_group.sync.aligned()
                if pingpong:
                    T.ptx.bar.arrive(T.uint32(9 - wg), T.uint32(256))
                T.ptx.wgmma.wait_group.sync.aligned(0)
                if causal:
                    if j * BC + BC > bx * BR + wg * 64:
                        for i in T.unroll(NT):
                            for h in T.unroll(2):
                                for e in T.unroll(2):
                                    if j * BC + i * 8 + t % 4 * 2 + e > bx * BR + wg * 64 + t // 32 * 16 + h * 8 + t % 32 // 4:
                                        sacc[i * 4 + h * 2 + e] = T.min_value("float32")
                for h in T.unroll(2):
                    mx[h] = m[h]
                    for i in T.unroll(NT):
                        mx[h] = T.max(mx[h], T.max(sacc[i * 4 + h * 2], sacc[i * 4 + h * 2 + 1]) * T.float32(scale))
                    mx[h] = T.cuda.warp_max(mx[h], 4)
                    alpha[h] = T.exp2(m[h] - mx[h])
                    m[h] = mx[h]
                    l[h] = l[h] * alpha[h]
                    for i in T.unroll(NT):
                        for e in T.unroll(2):
                            sacc[i * 4 + h * 2 + e] = T.exp2(sacc[i * 4 + h * 2 + e] * T.float32(scale) - mx[h])
                            l[h] = l[h] + sacc[i * 4 + h * 2 + e]
                    for i in T.unroll(DT):
                        for e in T.unroll(2):
                            oacc[i * 4 + h * 2 + e] = oacc[i * 4 + h * 2 + e] * alpha[h]
                for i in T.unroll(BC // 4):  # P as wgmma's A fragments: pairs of S's accumulators in fp16
                    T.ptx.cvt.rn.f16x2.f32(pf[i], sacc[i * 2 + 1], sacc[i * 2])
                T.cuda.mbarrier_wait(v_full.ptr_to([j % S]), (j // S) % 2)
                T.ptx.wgmma.fence.sync.aligned()
                for kk in T.unroll(BC // 16):
                    T.cuda.wgmma.encode_matrix_descriptor(T.address_of(desc_b[0]), Vs.ptr_to([j % S, 0, kk * 16, 0]),
                                                          BC * 128 // 16, 64, SWIZZLE_128B)
                    T.ptx[WGMMA_O](*[oacc[i] for i in range(D // 2)], pf[kk * 4], pf[kk * 4 + 1], pf[kk * 4 + 2],
                                   pf[kk * 4 + 3], desc_b[0], T.bool(True), 1, 1, 1)
                T.ptx.wgmma.commit_group.sync.aligned()
                T.ptx.wgmma.wait_group.sync.aligned(0)
                if t == 0:
                    T.ptx.mbarrier.arrive.shared.b64(empty.ptr_to([j % S]), T.uint32(1))
            if pingpong and wg == 0:
                T.ptx.bar.sync(T.uint32(8), T.uint32(256))
            for h in T.unroll(2):
                l[h] = T.cuda.warp_sum(l[h], 4)
                for i in T.unroll(DT):
                    O[bh, bx * BR + wg * 64 + t // 32 * 16 + h * 8 + t % 32 // 4, T.Ramp(i * 8 + t % 4 * 2, 1, 2)] = T.Cast(
                        "float16x2", oacc[T.Ramp(i * 4 + h * 2, 1, 2)] / T.Broadcast(l[h], 2))

    return main


@T.macro
def gemm_s(Qs, Ks, sacc, desc_a, desc_b, st, wg, D, BC):
    """S = Q K^T for this warpgroup's 64 rows, issued (not waited for): D / 16 wgmma m64n{BC}k16, both
    operands K-major in 128-byte-swizzled shared memory; the first step overwrites S (scale-d false)."""
    T.ptx.wgmma.fence.sync.aligned()
    for kk in T.unroll(D // 16):
        T.cuda.wgmma.encode_matrix_descriptor(T.address_of(desc_a[0]), Qs.ptr_to([kk // 4, wg * 64, kk % 4 * 16]),
                                              1, 64, SWIZZLE_128B)
        T.cuda.wgmma.encode_matrix_descriptor(T.address_of(desc_b[0]), Ks.ptr_to([st, kk // 4, 0, kk % 4 * 16]),
                                              1, 64, SWIZZLE_128B)
        T.ptx[f"wgmma.mma_async.sync.aligned.m64n{BC}k16.f32.f16.f16"](
            *[sacc[i] for i in range(BC // 2)], desc_a[0], desc_b[0], kk > 0, 1, 1, 0, 0)
    T.ptx.wgmma.commit_group.sync.aligned()


@T.macro
def gemm_o(Vs, oacc, pf, desc_b, st, D, BC):
    """O += P V, issued: P from registers (wgmma's A fragments), V MN-major in shared memory."""
    T.ptx.wgmma.fence.sync.aligned()
    for kk in T.unroll(BC // 16):
        T.cuda.wgmma.encode_matrix_descriptor(T.address_of(desc_b[0]), Vs.ptr_to([st, 0, kk * 16, 0]),
                                              BC * 128 // 16, 64, SWIZZLE_128B)
        T.ptx[f"wgmma.mma_async.sync.aligned.m64n{D}k16.f32.f16.f16"](
            *[oacc[i] for i in range(D // 2)], pf[kk * 4], pf[kk * 4 + 1], pf[kk * 4 + 2], pf[kk * 4 + 3],
            desc_b[0], T.bool(True), 1, 1, 1)
    T.ptx.wgmma.commit_group.sync.aligned()


@T.macro
def mask_and_softmax(sacc, m, l, mx, alpha, j, row0, t, BC, scale, causal, fast_exp):
    """The online softmax of one S tile in place (P = exp2(S * scale - new max)), with the running max m,
    the running sum l and the factor alpha that the old O must be scaled by. Causal: the entries right of
    the diagonal become -inf first (row0: this warpgroup's first row)."""
    if causal:
        if j * BC + BC > row0:
            for i in T.unroll(BC // 8):
                for h in T.unroll(2):
                    for e in T.unroll(2):
                        if j * BC + i * 8 + t % 4 * 2 + e > row0 + t // 32 * 16 + h * 8 + t % 32 // 4:
                            sacc[i * 4 + h * 2 + e] = T.min_value("float32")
    for h in T.unroll(2):
        mx[h] = m[h]
        for i in T.unroll(BC // 8):
            mx[h] = T.max(mx[h], T.max(sacc[i * 4 + h * 2], sacc[i * 4 + h * 2 + 1]) * T.float32(scale))
        mx[h] = T.cuda.warp_max(mx[h], 4)
        alpha[h] = T.exp2(m[h] - mx[h])
        m[h] = mx[h]
        l[h] = l[h] * alpha[h]
        for i in T.unroll(BC // 8):
            for e in T.unroll(2):
                if fast_exp:
                    T.ptx.ex2.approx.ftz.f32(sacc[i * 4 + h * 2 + e], sacc[i * 4 + h * 2 + e] * T.float32(scale) - mx[h])
                else:
                    sacc[i * 4 + h * 2 + e] = T.exp2(sacc[i * 4 + h * 2 + e] * T.float32(scale) - mx[h])
                l[h] = l[h] + sacc[i * 4 + h * 2 + e]


@T.macro
def rescale_and_pack(oacc, sacc, pf, alpha, D, BC):
    for h in T.unroll(2):
        for i in T.unroll(D // 8):
            for e in T.unroll(2):
                oacc[i * 4 + h * 2 + e] = oacc[i * 4 + h * 2 + e] * alpha[h]
    for i in T.unroll(BC // 4):
        T.ptx.cvt.rn.f16x2.f32(pf[i], sacc[i * 2 + 1], sacc[i * 2])


def flash_wgmma_overlap(BH, N, D, causal=False, BC=128, stages=2, fast_exp=False, consumer_registers=232,
                        pingpong=False, peeled=False):
    """flash_wgmma with each warpgroup's softmax of tile j + 1 overlapped with its own P V of tile j:
    S of tile j + 1 is issued before P V of tile j, and the softmax runs while P V is in flight.
    Not `peeled`, the loop issues S of tile j + 1 `if j + 1 < NJ` and ptxas serializes every wgmma
    (C7514); `peeled` (flash_wgmma_peeled), the last tile (and, causal, the diagonal's) runs after it."""
    BR = 128
    boxes = D // 64
    scale = LOG2E / D ** 0.5
    S = stages
    q_bytes, kv_bytes = BR * D * 2, BC * D * 2
    bars = (BR * D + 2 * S * BC * D) * 2
    smem = bars + (1 + 4 * S) * 8
    producer_registers = 24 if consumer_registers > 232 else PRODUCER_REGISTERS

    @T.prim_func
    def main(Q: T.Buffer((BH, N, D), "float16"), K: T.Buffer((BH, N, D), "float16"),
             V: T.Buffer((BH, N, D), "float16"), O: T.Buffer((BH, N, D), "float16")):
        Q_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
        T.tensormap_encode_tiled(Q_map, Q.data, D, BH * N, D * 2, 64, BR, 1, 1, **tma_options())
        K_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
        T.tensormap_encode_tiled(K_map, K.data, D, BH * N, D * 2, 64, BC, 1, 1, **tma_options())
        V_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
        T.tensormap_encode_tiled(V_map, V.data, D, BH * N, D * 2, 64, BC, 1, 1, **tma_options())
        T.device_entry()
        bx0, bh = T.cta_id([N // BR, BH])
        tid = T.thread_id([384])
        bx = T.meta_var(N // BR - 1 - bx0 if causal else bx0)
        NJ = T.meta_var(((bx + 1) * BR + BC - 1) // BC if causal else N // BC)
        pool = T.alloc_buffer((smem,), "uint8", scope="shared.dyn", align=1024)
        Qs = T.decl_buffer((boxes, BR, 64), "float16", data=pool.data, elem_offset=0, scope="shared.dyn")
        Ks = T.decl_buffer((S, boxes, BC, 64), "float16", data=pool.data, elem_offset=BR * D, scope="shared.dyn")
        Vs = T.decl_buffer((S, boxes, BC, 64), "float16", data=pool.data, elem_offset=BR * D + S * BC * D,
                           scope="shared.dyn")
        q_full = T.decl_buffer((1,), "uint64", data=pool.data, elem_offset=bars // 8, scope="shared.dyn")
        k_full = T.decl_buffer((S,), "uint64", data=pool.data, elem_offset=bars // 8 + 1, scope="shared.dyn")
        v_full = T.decl_buffer((S,), "uint64", data=pool.data, elem_offset=bars // 8 + 1 + S, scope="shared.dyn")
        empty = T.decl_buffer((S,), "uint64", data=pool.data, elem_offset=bars // 8 + 1 + 2 * S, scope="shared.dyn")
        k_empty = T.decl_buffer((S,), "uint64", data=pool.data, elem_offset=bars // 8 + 1 + 3 * S, scope="shared.dyn")
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(q_full.ptr_to([0]), T.uint32(1))
            for s in T.unroll(S):
                T.ptx.mbarrier.init.shared.b64(k_full.ptr_to([s]), T.uint32(1))
                T.ptx.mbarrier.init.shared.b64(v_full.ptr_to([s]), T.uint32(1))
                T.ptx.mbarrier.init.shared.b64(empty.ptr_to([s]), T.uint32(2))
                T.ptx.mbarrier.init.shared.b64(k_empty.ptr_to([s]), T.uint32(2))
            T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cta_sync()
        if tid < 128:
            T.ptx["setmaxnreg.dec.sync.aligned.u32"](producer_registers)
            if tid == 0:
                tma_tile(lambda b: Qs.ptr_to([b, 0, 0]), Q_map, bh * N + bx * BR, q_full.ptr_to([0]), boxes, q_bytes)
                for j in T.serial(NJ):
                    T.cuda.mbarrier_wait(k_empty.ptr_to([j % S]), (j // S) % 2 ^ 1)
                    tma_tile(lambda b: Ks.ptr_to([j % S, b, 0, 0]), K_map, bh * N + j * BC, k_full.ptr_to([j % S]),
                             boxes, kv_bytes)
                    T.cuda.mbarrier_wait(empty.ptr_to([j % S]), (j // S) % 2 ^ 1)
                    tma_tile(lambda b: Vs.ptr_to([j % S, b, 0, 0]), V_map, bh * N + j * BC, v_full.ptr_to([j % S]),
                             boxes, kv_bytes)
        else:
            T.ptx["setmaxnreg.inc.sync.aligned.u32"](consumer_registers)
            wg = T.meta_var(tid // 128 - 1)
            t = T.meta_var(tid % 128)
            row0 = T.meta_var(bx * BR + wg * 64)
            sacc = T.alloc_local((BC // 2,), "float32")
            oacc = T.alloc_local((D // 2,), "float32")
            pf = T.alloc_local((BC // 4,), "uint32")
            desc_a = T.alloc_local((1,), "uint64")
            desc_b = T.alloc_local((1,), "uint64")
            m = T.alloc_local((2,), "float32")
            l = T.alloc_local((2,), "float32")
            mx = T.alloc_local((2,), "float32")
            alpha = T.alloc_local((2,), "float32")
            for i in T.unroll(D // 2):
                oacc[i] = T.float32(0)
            for h in T.unroll(2):
                m[h] = T.float32(-1e30)
                l[h] = T.float32(0)
            T.cuda.mbarrier_wait(q_full.ptr_to([0]), 0)
            T.cuda.mbarrier_wait(k_full.ptr_to([0]), 0)
            gemm_s(Qs, Ks, sacc, desc_a, desc_b, 0, wg, D, BC)
            T.ptx.wgmma.wait_group.sync.aligned(0)
            if t == 0:
                T.ptx.mbarrier.arrive.shared.b64(k_empty.ptr_to([0]), T.uint32(1))
            mask_and_softmax(sacc, m, l, mx, alpha, 0, row0, t, BC, scale, causal, fast_exp)
            rescale_and_pack(oacc, sacc, pf, alpha, D, BC)
            if pingpong and wg == 1:
                T.ptx.bar.arrive(T.uint32(8), T.uint32(256))
            if peeled:
                if causal:  # the tile on the diagonal (the last) is peeled too, so the loop has no compares
                    for j in T.serial(NJ - 2):
                        overlap_step(Qs, Ks, Vs, sacc, oacc, pf, desc_a, desc_b, m, l, mx, alpha, k_full, v_full, k_empty,
                                     empty, j, j, row0, wg, t, S, D, BC, scale, False, fast_exp, pingpong)
                    if NJ >= 2:
                        overlap_step(Qs, Ks, Vs, sacc, oacc, pf, desc_a, desc_b, m, l, mx, alpha, k_full, v_full, k_empty,
                                     empty, NJ - 2, NJ - 2, row0, wg, t, S, D, BC, scale, True, fast_exp, pingpong)
                else:
                    for j in T.serial(NJ - 1):
                        overlap_step(Qs, Ks, Vs, sacc, oacc, pf, desc_a, desc_b, m, l, mx, alpha, k_full, v_full, k_empty,
                                     empty, j, j, row0, wg, t, S, D, BC, scale, False, fast_exp, pingpong)
                T.cuda.mbarrier_wait(v_full.ptr_to([(NJ - 1) % S]), ((NJ - 1) // S) % 2)
                if pingpong:
                    T.ptx.bar.sync(T.uint32(8 + wg), T.uint32(256))
                gemm_o(Vs, oacc, pf, desc_b, (NJ - 1) % S, D, BC)
                if pingpong:
                    T.ptx.bar.arrive(T.uint32(9 - wg), T.uint32(256))
                T.ptx.wgmma.wait_group.sync.aligned(0)
                if t == 0:
                    T.ptx.mbarrier.arrive.shared.b64(empty.ptr_to([(NJ - 1) % S]), T.uint32(1))
            else:
                for j in T.serial(NJ):
                    if j + 1 < NJ:
                        T.cuda.mbarrier_wait(k_full.ptr_to([(j + 1) % S]), ((j + 1) // S) % 2)
                    T.cuda.mbarrier_wait(v_full.ptr_to([j % S]), (j // S) % 2)
                    if pingpong:
                        T.ptx.bar.sync(T.uint32(8 + wg), T.uint32(256))
                    if j + 1 < NJ:
                        gemm_s(Qs, Ks, sacc, desc_a, desc_b, (j + 1) % S, wg, D, BC)
                    gemm_o(Vs, oacc, pf, desc_b, j % S, D, BC)
                    if pingpong:
                        T.ptx.bar.arrive(T.uint32(9 - wg), T.uint32(256))
                    if j + 1 < NJ:
                        T.ptx.wgmma.wait_group.sync.aligned(1)
                        if t == 0:
                            T.ptx.mbarrier.arrive.shared.b64(k_empty.ptr_to([(j + 1) % S]), T.uint32(1))
                        mask_and_softmax(sacc, m, l, mx, alpha, j + 1, row0, t, BC, scale, causal, fast_exp)
                    T.ptx.wgmma.wait_group.sync.aligned(0)
                    if t == 0:
                        T.ptx.mbarrier.arrive.shared.b64(empty.ptr_to([j % S]), T.uint32(1))
                    if j + 1 < NJ:
                        rescale_and_pack(oacc, sacc, pf, alpha, D, BC)
            if pingpong and wg == 0:
                T.ptx.bar.sync(T.uint32(8), T.uint32(256))
            for h in T.unroll(2):
                if peeled:  # one reciprocal a row, then multiplies
                    l[h] = T.float32(1) / T.cuda.warp_sum(l[h], 4)
                    for i in T.unroll(D // 8):
                        O[bh, row0 + t // 32 * 16 + h * 8 + t % 32 // 4, T.Ramp(i * 8 + t % 4 * 2, 1, 2)] = T.Cast(
                            "float16x2", oacc[T.Ramp(i * 4 + h * 2, 1, 2)] * T.Broadcast(l[h], 2))
                else:
                    l[h] = T.cuda.warp_sum(l[h], 4)
                    for i in T.unroll(D // 8):
                        O[bh, row0 + t // 32 * 16 + h * 8 + t % 32 // 4, T.Ramp(i * 8 + t % 4 * 2, 1, 2)] = T.Cast(
                            "float16x2", oacc[T.Ramp(i * 4 + h * 2, 1, 2)] / T.Broadcast(l[h], 2))

    return main


@T.macro
def overlap_step(Qs, Ks, Vs, sacc, oacc, pf, desc_a, desc_b, m, l, mx, alpha, k_full, v_full, k_empty, empty, j, p,
                 row0, wg, t, S, D, BC, scale, masked, fast_exp, pingpong):
    """One iteration of the peeled overlap: S of tile j + 1 and P V of tile j issued together, the
    softmax of tile j + 1 while P V runs (masked below the diagonal if `masked`), then O rescaled. p:
    tile j's pipeline slot (j itself, or counted on across work items in the persistent kernel)."""
    T.cuda.mbarrier_wait(k_full.ptr_to([(p + 1) % S]), ((p + 1) // S) % 2)
    T.cuda.mbarrier_wait(v_full.ptr_to([p % S]), (p // S) % 2)
    if pingpong:
        T.ptx.bar.sync(T.uint32(8 + wg), T.uint32(256))
    gemm_s(Qs, Ks, sacc, desc_a, desc_b, (p + 1) % S, wg, D, BC)
    gemm_o(Vs, oacc, pf, desc_b, p % S, D, BC)
    if pingpong:
        T.ptx.bar.arrive(T.uint32(9 - wg), T.uint32(256))
    T.ptx.wgmma.wait_group.sync.aligned(1)
    if t == 0:
        T.ptx.mbarrier.arrive.shared.b64(k_empty.ptr_to([(p + 1) % S]), T.uint32(1))
    mask_and_softmax(sacc, m, l, mx, alpha, j + 1, row0, t, BC, scale, masked, fast_exp)
    T.ptx.wgmma.wait_group.sync.aligned(0)
    if t == 0:
        T.ptx.mbarrier.arrive.shared.b64(empty.ptr_to([p % S]), T.uint32(1))
    rescale_and_pack(oacc, sacc, pf, alpha, D, BC)


def flash_wgmma_peeled(BH, N, D, causal=False, BC=128, stages=2, fast_exp=False, consumer_registers=232,
                       pingpong=False):
    """flash_wgmma_overlap with its last tile (and, causal, the diagonal's) peeled, so that ptxas sees
    the same wgmma groups in every iteration and keeps them asynchronous."""
    return flash_wgmma_overlap(BH, N, D, causal, BC, stages, fast_exp, consumer_registers, pingpong, peeled=True)


# --- mma.sync, second round: the diagonal tile peeled out of the causal loop, and exp2 by ex2.approx ---
@T.macro
def mma_tile(K, V, Ks, Vs, qf, kf, pf, s, o, m, l, mx, alpha, bh, j, NJ, row0, warp, lane, tid, threads, BC, CH,
             D, scale, masked, fast_exp):
    """One tile of the cp.async pipeline of flash_mma: prefetch tile j + 1, wait for tile j, S, the
    online softmax (masked below the diagonal if `masked`), O += P V."""
    if j + 1 < NJ:
        load_async(K, V, Ks, Vs, bh, j + 1, (j + 1) % 2, tid, threads, BC, CH)
    else:
        T.ptx["cp.async.commit_group"]()
    T.ptx["cp.async.wait_group"](1)
    T.cuda.cta_sync()
    st = T.meta_var(j % 2)
    for i in T.unroll(BC // 2):
        s[i] = T.float32(0)
    for kk in T.unroll(D // 16):
        for nt2 in T.unroll(BC // 16):
            r = T.meta_var(nt2 * 16 + lane // 16 * 8 + lane % 8)
            c = T.meta_var(kk * 2 + lane // 8 % 2)
            T.ptx.ldmatrix.sync.aligned.m8n8.x4.shared.b16(kf[0], kf[1], kf[2], kf[3], Ks.ptr_to([st, r, (c ^ r % 8) * 8]))
            for h in T.unroll(2):
                nt = T.meta_var(nt2 * 2 + h)
                T.ptx[MMA](s[nt * 4], s[nt * 4 + 1], s[nt * 4 + 2], s[nt * 4 + 3],
                           qf[kk * 4], qf[kk * 4 + 1], qf[kk * 4 + 2], qf[kk * 4 + 3], kf[h * 2], kf[h * 2 + 1],
                           s[nt * 4], s[nt * 4 + 1], s[nt * 4 + 2], s[nt * 4 + 3])
    if masked:
        for nt in T.unroll(BC // 8):
            for h in T.unroll(2):
                for e in T.unroll(2):
                    if j * BC + nt * 8 + lane % 4 * 2 + e > row0 + h * 8 + lane // 4:
                        s[nt * 4 + h * 2 + e] = T.min_value("float32")
    for h in T.unroll(2):
        mx[h] = m[h]
        for nt in T.unroll(BC // 8):
            mx[h] = T.max(mx[h], T.max(s[nt * 4 + h * 2], s[nt * 4 + h * 2 + 1]) * T.float32(scale))
        mx[h] = T.cuda.warp_max(mx[h], 4)
        if fast_exp:
            T.ptx.ex2.approx.ftz.f32(alpha[h], m[h] - mx[h])
        else:
            alpha[h] = T.exp2(m[h] - mx[h])
        m[h] = mx[h]
        l[h] = l[h] * alpha[h]
        for nt in T.unroll(BC // 8):
            for e in T.unroll(2):
                if fast_exp:
                    T.ptx.ex2.approx.ftz.f32(s[nt * 4 + h * 2 + e], s[nt * 4 + h * 2 + e] * T.float32(scale) - mx[h])
                else:
                    s[nt * 4 + h * 2 + e] = T.exp2(s[nt * 4 + h * 2 + e] * T.float32(scale) - mx[h])
                l[h] = l[h] + s[nt * 4 + h * 2 + e]
        for dt in T.unroll(D // 8):
            for e in T.unroll(2):
                o[dt * 4 + h * 2 + e] = o[dt * 4 + h * 2 + e] * alpha[h]
    for kc in T.unroll(BC // 16):
        for h in T.unroll(2):
            for g in T.unroll(2):
                T.ptx.cvt.rn.f16x2.f32(pf[h * 2 + g], s[(kc * 2 + h) * 4 + g * 2 + 1], s[(kc * 2 + h) * 4 + g * 2])
        for dt2 in T.unroll(D // 16):
            r = T.meta_var(kc * 16 + lane // 8 % 2 * 8 + lane % 8)
            c = T.meta_var(dt2 * 2 + lane // 16)
            T.ptx.ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16(kf[0], kf[1], kf[2], kf[3], Vs.ptr_to([st, r, (c ^ r % 8) * 8]))
            for h in T.unroll(2):
                dt = T.meta_var(dt2 * 2 + h)
                T.ptx[MMA](o[dt * 4], o[dt * 4 + 1], o[dt * 4 + 2], o[dt * 4 + 3],
                           pf[0], pf[1], pf[2], pf[3], kf[h * 2], kf[h * 2 + 1],
                           o[dt * 4], o[dt * 4 + 1], o[dt * 4 + 2], o[dt * 4 + 3])
    T.cuda.cta_sync()


def flash_mma_peeled(BH, N, D, causal=False, fast_exp=False, peel=True):
    """flash_mma's pipelined kernel (4 warps, 64-key tiles) with, when causal, the tile that crosses the
    diagonal peeled out of the loop (so the loop has no compares; BR = BC = 64: one such tile a block),
    exp2 by ex2.approx.ftz if fast_exp, and O divided by l through one reciprocal a row."""
    warps, BC = 4, 64
    BR, threads, CH = 16 * warps, 32 * warps, D // 8
    scale = LOG2E / D ** 0.5

    @T.prim_func
    def main(Q: T.Buffer((BH, N, D), "float16"), K: T.Buffer((BH, N, D), "float16"),
             V: T.Buffer((BH, N, D), "float16"), O: T.Buffer((BH, N, D), "float16")):
        T.device_entry()
        bx0, bh = T.cta_id([N // BR, BH])
        bx = T.meta_var(N // BR - 1 - bx0 if causal else bx0)
        NJ = T.meta_var(((bx + 1) * BR + BC - 1) // BC if causal else N // BC)
        tid = T.thread_id([threads])
        pool = T.alloc_buffer(((BR + 4 * BC) * D,), "float16", scope="shared.dyn", align=128)
        Qs = T.decl_buffer((BR, D), "float16", data=pool.data, elem_offset=0, scope="shared.dyn")
        Ks = T.decl_buffer((2, BC, D), "float16", data=pool.data, elem_offset=BR * D, scope="shared.dyn")
        Vs = T.decl_buffer((2, BC, D), "float16", data=pool.data, elem_offset=(BR + 2 * BC) * D, scope="shared.dyn")
        qf = T.alloc_local((D // 4,), "uint32")
        kf = T.alloc_local((4,), "uint32")
        pf = T.alloc_local((4,), "uint32")
        s = T.alloc_local((BC // 2,), "float32")
        o = T.alloc_local((D // 2,), "float32")
        m = T.alloc_local((2,), "float32")
        l = T.alloc_local((2,), "float32")
        mx = T.alloc_local((2,), "float32")
        alpha = T.alloc_local((2,), "float32")
        warp = T.meta_var(tid // 32)
        lane = T.meta_var(tid % 32)
        row0 = T.meta_var(bx * BR + warp * 16)
        load_async(K, V, Ks, Vs, bh, 0, 0, tid, threads, BC, CH)
        for i in T.unroll(BR * CH // threads):
            r = T.meta_var((i * threads + tid) // CH)
            c = T.meta_var((i * threads + tid) % CH)
            Qs[r, T.Ramp((c ^ r % 8) * 8, 1, 8)] = Q[bh, bx * BR + r, T.Ramp(c * 8, 1, 8)]
        for i in T.unroll(D // 2):
            o[i] = T.float32(0)
        for i in T.unroll(2):
            m[i] = T.float32(-1e30)
            l[i] = T.float32(0)
        T.cuda.cta_sync()
        for kk in T.unroll(D // 16):
            r = T.meta_var(warp * 16 + lane % 16)
            c = T.meta_var(kk * 2 + lane // 16)
            T.ptx.ldmatrix.sync.aligned.m8n8.x4.shared.b16(qf[kk * 4], qf[kk * 4 + 1], qf[kk * 4 + 2], qf[kk * 4 + 3],
                                                            Qs.ptr_to([r, (c ^ r % 8) * 8]))
        if causal and peel:
            for j in T.serial(NJ - 1):
                mma_tile(K, V, Ks, Vs, qf, kf, pf, s, o, m, l, mx, alpha, bh, j, NJ, row0, warp, lane, tid, threads,
                         BC, CH, D, scale, False, fast_exp)
            mma_tile(K, V, Ks, Vs, qf, kf, pf, s, o, m, l, mx, alpha, bh, NJ - 1, NJ, row0, warp, lane, tid, threads,
                     BC, CH, D, scale, True, fast_exp)
        else:
            for j in T.serial(NJ):
                mma_tile(K, V, Ks, Vs, qf, kf, pf, s, o, m, l, mx, alpha, bh, j, NJ, row0, warp, lane, tid, threads,
                         BC, CH, D, scale, causal, fast_exp)
        for h in T.unroll(2):
            l[h] = T.float32(1) / T.cuda.warp_sum(l[h], 4)
            for dt in T.unroll(D // 8):
                O[bh, row0 + h * 8 + lane // 4, T.Ramp(dt * 8 + lane % 4 * 2, 1, 2)] = T.Cast(
                    "float16x2", o[T.Ramp(dt * 4 + h * 2, 1, 2)] * T.Broadcast(l[h], 2))

    return main


# --- Hopper, round 3: persistent (one block per SM walking over (row block, head) tiles), as cuDNN's is ---
def flash_wgmma_persistent(BH, N, D, causal=False, BC=128, stages=2, fast_exp=True, blocks=132, by_head=False):
    """flash_wgmma_peeled with ping-pong, persistent: `blocks` blocks (one per SM) take the (row block,
    head) tiles in turn (causal: the longest first, over all heads, or, `by_head`, head by head so
    that the blocks at work share K and V in L2); the producer loads the next tile's Q (when both
    consumers are done with the last: q_empty) and K, V while the consumers finish and store O."""
    BR = 128
    boxes = D // 64
    scale = LOG2E / D ** 0.5
    S = stages
    NB = N // BR
    WORK = NB * BH
    q_bytes, kv_bytes = BR * D * 2, BC * D * 2
    bars = (BR * D + 2 * S * BC * D) * 2
    smem = bars + (2 + 4 * S) * 8

    @T.prim_func
    def main(Q: T.Buffer((BH, N, D), "float16"), K: T.Buffer((BH, N, D), "float16"),
             V: T.Buffer((BH, N, D), "float16"), O: T.Buffer((BH, N, D), "float16")):
        Q_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
        T.tensormap_encode_tiled(Q_map, Q.data, D, BH * N, D * 2, 64, BR, 1, 1, **tma_options())
        K_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
        T.tensormap_encode_tiled(K_map, K.data, D, BH * N, D * 2, 64, BC, 1, 1, **tma_options())
        V_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
        T.tensormap_encode_tiled(V_map, V.data, D, BH * N, D * 2, 64, BC, 1, 1, **tma_options())
        T.device_entry()
        cta = T.cta_id([blocks])
        tid = T.thread_id([384])
        pool = T.alloc_buffer((smem,), "uint8", scope="shared.dyn", align=1024)
        Qs = T.decl_buffer((boxes, BR, 64), "float16", data=pool.data, elem_offset=0, scope="shared.dyn")
        Ks = T.decl_buffer((S, boxes, BC, 64), "float16", data=pool.data, elem_offset=BR * D, scope="shared.dyn")
        Vs = T.decl_buffer((S, boxes, BC, 64), "float16", data=pool.data, elem_offset=BR * D + S * BC * D,
                           scope="shared.dyn")
        q_full = T.decl_buffer((1,), "uint64", data=pool.data, elem_offset=bars // 8, scope="shared.dyn")
        q_empty = T.decl_buffer((1,), "uint64", data=pool.data, elem_offset=bars // 8 + 1, scope="shared.dyn")
        k_full = T.decl_buffer((S,), "uint64", data=pool.data, elem_offset=bars // 8 + 2, scope="shared.dyn")
        v_full = T.decl_buffer((S,), "uint64", data=pool.data, elem_offset=bars // 8 + 2 + S, scope="shared.dyn")
        empty = T.decl_buffer((S,), "uint64", data=pool.data, elem_offset=bars // 8 + 2 + 2 * S, scope="shared.dyn")
        k_empty = T.decl_buffer((S,), "uint64", data=pool.data, elem_offset=bars // 8 + 2 + 3 * S, scope="shared.dyn")
        counter = T.alloc_local((1,), "int32")
        counter[0] = 0
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(q_full.ptr_to([0]), T.uint32(1))
            T.ptx.mbarrier.init.shared.b64(q_empty.ptr_to([0]), T.uint32(2))
            for s in T.unroll(S):
                T.ptx.mbarrier.init.shared.b64(k_full.ptr_to([s]), T.uint32(1))
                T.ptx.mbarrier.init.shared.b64(v_full.ptr_to([s]), T.uint32(1))
                T.ptx.mbarrier.init.shared.b64(empty.ptr_to([s]), T.uint32(2))
                T.ptx.mbarrier.init.shared.b64(k_empty.ptr_to([s]), T.uint32(2))
            T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cta_sync()
        if tid < 128:
            T.ptx["setmaxnreg.dec.sync.aligned.u32"](PRODUCER_REGISTERS)
            if tid == 0:
                for it in T.serial((WORK - cta + blocks - 1) // blocks):
                    w = T.meta_var(cta + it * blocks)
                    bx = T.meta_var((NB - 1 - w % NB if by_head else NB - 1 - w // BH) if causal else w % NB)
                    bh = T.meta_var((w // NB if by_head else w % BH) if causal else w // NB)
                    NJ = T.meta_var(((bx + 1) * BR + BC - 1) // BC if causal else N // BC)
                    T.cuda.mbarrier_wait(q_empty.ptr_to([0]), it % 2 ^ 1)
                    tma_tile(lambda b: Qs.ptr_to([b, 0, 0]), Q_map, bh * N + bx * BR, q_full.ptr_to([0]), boxes, q_bytes)
                    for j in T.serial(NJ):
                        p = T.meta_var(counter[0] + j)
                        T.cuda.mbarrier_wait(k_empty.ptr_to([p % S]), (p // S) % 2 ^ 1)
                        tma_tile(lambda b: Ks.ptr_to([p % S, b, 0, 0]), K_map, bh * N + j * BC, k_full.ptr_to([p % S]),
                                 boxes, kv_bytes)
                        T.cuda.mbarrier_wait(empty.ptr_to([p % S]), (p // S) % 2 ^ 1)
                        tma_tile(lambda b: Vs.ptr_to([p % S, b, 0, 0]), V_map, bh * N + j * BC, v_full.ptr_to([p % S]),
                                 boxes, kv_bytes)
                    counter[0] = counter[0] + NJ
        else:
            T.ptx["setmaxnreg.inc.sync.aligned.u32"](CONSUMER_REGISTERS)
            wg = T.meta_var(tid // 128 - 1)
            t = T.meta_var(tid % 128)
            sacc = T.alloc_local((BC // 2,), "float32")
            oacc = T.alloc_local((D // 2,), "float32")
            pf = T.alloc_local((BC // 4,), "uint32")
            desc_a = T.alloc_local((1,), "uint64")
            desc_b = T.alloc_local((1,), "uint64")
            m = T.alloc_local((2,), "float32")
            l = T.alloc_local((2,), "float32")
            mx = T.alloc_local((2,), "float32")
            alpha = T.alloc_local((2,), "float32")
            if wg == 1:
                T.ptx.bar.arrive(T.uint32(8), T.uint32(256))
            for it in T.serial((WORK - cta + blocks - 1) // blocks):
                w = T.meta_var(cta + it * blocks)
                bx = T.meta_var((NB - 1 - w % NB if by_head else NB - 1 - w // BH) if causal else w % NB)
                bh = T.meta_var((w // NB if by_head else w % BH) if causal else w // NB)
                NJ = T.meta_var(((bx + 1) * BR + BC - 1) // BC if causal else N // BC)
                row0 = T.meta_var(bx * BR + wg * 64)
                c = T.meta_var(counter[0])
                for i in T.unroll(D // 2):
                    oacc[i] = T.float32(0)
                for h in T.unroll(2):
                    m[h] = T.float32(-1e30)
                    l[h] = T.float32(0)
                T.cuda.mbarrier_wait(q_full.ptr_to([0]), it % 2)
                T.cuda.mbarrier_wait(k_full.ptr_to([c % S]), (c // S) % 2)
                gemm_s(Qs, Ks, sacc, desc_a, desc_b, c % S, wg, D, BC)
                T.ptx.wgmma.wait_group.sync.aligned(0)
                if t == 0:
                    T.ptx.mbarrier.arrive.shared.b64(k_empty.ptr_to([c % S]), T.uint32(1))
                mask_and_softmax(sacc, m, l, mx, alpha, 0, row0, t, BC, scale, causal, fast_exp)
                rescale_and_pack(oacc, sacc, pf, alpha, D, BC)
                if causal:
                    for j in T.serial(NJ - 2):
                        overlap_step(Qs, Ks, Vs, sacc, oacc, pf, desc_a, desc_b, m, l, mx, alpha, k_full, v_full,
                                        k_empty, empty, j, c + j, row0, wg, t, S, D, BC, scale, False, fast_exp, True)
                    if NJ >= 2:
                        overlap_step(Qs, Ks, Vs, sacc, oacc, pf, desc_a, desc_b, m, l, mx, alpha, k_full, v_full,
                                        k_empty, empty, NJ - 2, c + NJ - 2, row0, wg, t, S, D, BC, scale, True, fast_exp, True)
                else:
                    for j in T.serial(NJ - 1):
                        overlap_step(Qs, Ks, Vs, sacc, oacc, pf, desc_a, desc_b, m, l, mx, alpha, k_full, v_full,
                                        k_empty, empty, j, c + j, row0, wg, t, S, D, BC, scale, False, fast_exp, True)
                if t == 0:  # every S of this tile is done: Q may be overwritten
                    T.ptx.mbarrier.arrive.shared.b64(q_empty.ptr_to([0]), T.uint32(1))
                T.cuda.mbarrier_wait(v_full.ptr_to([(c + NJ - 1) % S]), ((c + NJ - 1) // S) % 2)
                T.ptx.bar.sync(T.uint32(8 + wg), T.uint32(256))
                gemm_o(Vs, oacc, pf, desc_b, (c + NJ - 1) % S, D, BC)
                T.ptx.bar.arrive(T.uint32(9 - wg), T.uint32(256))
                T.ptx.wgmma.wait_group.sync.aligned(0)
                if t == 0:
                    T.ptx.mbarrier.arrive.shared.b64(empty.ptr_to([(c + NJ - 1) % S]), T.uint32(1))
                for h in T.unroll(2):
                    l[h] = T.float32(1) / T.cuda.warp_sum(l[h], 4)
                    for i in T.unroll(D // 8):
                        O[bh, row0 + t // 32 * 16 + h * 8 + t % 32 // 4, T.Ramp(i * 8 + t % 4 * 2, 1, 2)] = T.Cast(
                            "float16x2", oacc[T.Ramp(i * 4 + h * 2, 1, 2)] * T.Broadcast(l[h], 2))
                counter[0] = counter[0] + NJ
            if wg == 0:
                T.ptx.bar.sync(T.uint32(8), T.uint32(256))

    return main
