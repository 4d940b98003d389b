"""Plumbing of the decoding lesson (notebook 12): the float64 reference, the paged KV cache and the
refusals that guard it, the byte and FLOP counts, TVM's own decode kernel as a baseline, and the
sweep over batch and context. The kernels and the split plan are the lesson, so they stay in the
notebook.

A paged cache holds K and V as pages of `page` tokens, (pages, 2, kv heads, page, d), the layout
TVM's and FlashInfer's kernels take; sequence b's key t lives in page table[b, t // page] at row
t % page (a block table, as vLLM names it). Pages no sequence uses, and the tail of each last page,
hold garbage, so a kernel that reads past a sequence's end gives a wrong answer rather than a
lucky one.
"""

from __future__ import annotations

import functools

import numpy as np

from .kernels import check_number

#: the lesson's model: Llama-like heads
HQ, HKV, D, PAGE = 32, 8, 128, 16
#: what unused cache rows hold: keys that would win every softmax, values far from any real one
GARBAGE_K, GARBAGE_V = 8.0, 1000.0


def check_heads(hq: int, hkv: int, d: int = D) -> int:
    """The group size hq // hkv; a clear error for head counts grouped queries cannot share, or for a
    head dimension the kernels do not take (a key's 128 dims sit on 16 lanes of 8 halves each)."""
    check_number("the query heads", hq)
    check_number("the KV heads", hkv)
    if hq % hkv:
        raise ValueError(f"{hq} query heads are not a multiple of {hkv} KV heads: each KV head must serve "
                         f"the same number of query heads")
    if d != 128:
        raise ValueError(f"head dimension {d!r} is not supported: the kernels take 128 (16 lanes x 8 halves)")
    return hq // hkv


def check_paged(kv: np.ndarray, table: np.ndarray, lengths: np.ndarray, page: int = PAGE) -> None:
    """Refuse a block table that points outside the cache or lengths the table cannot hold."""
    lengths, table = np.asarray(lengths), np.asarray(table)
    if table.ndim != 2 or lengths.shape != (table.shape[0],):
        raise ValueError(f"the block table has shape {table.shape} and the lengths {lengths.shape}: "
                         "one row of page indices and one length per sequence")
    if kv.ndim != 5 or kv.shape[1] != 2 or kv.shape[3] != page:
        raise ValueError(f"the cache has shape {kv.shape}, not (pages, 2, kv heads, {page}, d)")
    for b, n in enumerate(lengths):
        if n < 1:
            raise ValueError(f"sequence {b} has length {n}: a decoding step needs at least one token in the cache")
        if n > page * table.shape[1]:
            raise ValueError(f"sequence {b} has length {n}, above the {table.shape[1]} pages of {page} tokens "
                             f"its row of the block table can give ({page * table.shape[1]} tokens)")
        used = table[b, :-(-n // page)]
        bad = used[(used < 0) | (used >= kv.shape[0])]
        if bad.size:
            raise ValueError(f"sequence {b} names page {bad[0]}, outside the cache's {kv.shape[0]} pages")


def decode_bytes(lengths, hq: int = HQ, hkv: int = HKV, d: int = D) -> float:
    """The least DRAM traffic of one decoding step: every cached key and value once, q and o."""
    return float(2 * 2 * hkv * d * int(np.sum(lengths)) + 2 * 2 * hq * d * len(lengths))


def decode_flops(lengths, hq: int = HQ, d: int = D) -> float:
    """q.k and p.v: 4 d FLOP per query head and cached token."""
    return float(4 * hq * d * int(np.sum(lengths)))


def queries(b: int, hq: int = HQ, d: int = D, live: bool = True) -> np.ndarray:
    """One query token per sequence, (b, hq, d) fp16; the first head's logits reach the hundreds."""
    check_number("the batch", b)
    if not live:
        return np.zeros((b, hq, d), "float16")
    q = np.random.default_rng(1).standard_normal((b, hq, d), dtype=np.float32)
    q[:, 0] *= 20
    return q.astype("float16")


def dense_cache(b: int, n: int, hkv: int = HKV, d: int = D, live: bool = True) -> list[np.ndarray]:
    """K and V of b sequences of n tokens each, (b, hkv, n, d) fp16 (zeros where nothing runs)."""
    if not live:
        return [np.zeros((b, hkv, n, d), "float16") for _ in range(2)]
    g = np.random.default_rng(2)
    return [g.standard_normal((b, hkv, n, d), dtype=np.float32).astype("float16") for _ in range(2)]


def paged_cache(lengths, hkv: int = HKV, d: int = D, page: int = PAGE, spare: int = 3, live: bool = True):
    """(kv, table, lengths): the sequences' keys and values in shuffled pages of a cache with
    `spare` pages no sequence uses; the table has as many columns as the longest sequence needs."""
    lengths = np.asarray(lengths, "int32")
    for n in lengths:
        check_number("a sequence's length", int(n))
    need = [-(-int(n) // page) for n in lengths]
    total = sum(need) + spare
    g = np.random.default_rng(3)
    kv = np.empty((total, 2, hkv, page, d), "float16")
    if live:
        kv[:, 0], kv[:, 1] = GARBAGE_K, GARBAGE_V
    order = g.permutation(total).astype("int32")
    table = np.full((len(lengths), max(need)), -1, "int32")
    at = 0
    for b, (n, p) in enumerate(zip(lengths, need)):
        table[b, :p] = order[at:at + p]
        at += p
        if live:
            keys = g.standard_normal((2, hkv, int(n), d), dtype=np.float32).astype("float16")
            scatter(kv, table[b], keys, page)
    return kv, table, lengths


def scatter(kv, row, keys, page: int = PAGE) -> None:
    """Write one sequence's (2, hkv, n, d) keys and values into its pages."""
    for t0 in range(0, keys.shape[2], page):
        rows = keys[:, :, t0:t0 + page]
        kv[row[t0 // page], :, :, :rows.shape[2]] = rows


def gather(kv, row, n: int, page: int = PAGE) -> np.ndarray:
    """The page walk in NumPy: one sequence's (2, hkv, n, d) keys and values, read through its row
    of the block table, page by page."""
    pages = [kv[row[i // page]] for i in range(0, n, page)]
    return np.concatenate(pages, axis=2)[:, :, :n]


def pages_in_order(kv, table, lengths, page: int = PAGE):
    """(kv, table) holding the same cache with each sequence's pages side by side in the pool, in the
    order of its keys (as a fresh server would hand them out), and the pages no sequence uses after
    them: the same pool, so the same kernel runs on it, and timing the two shows what the shuffle costs."""
    need = -(-np.asarray(lengths) // page)
    used = np.concatenate([table[b, :p] for b, p in enumerate(need)])
    order = np.concatenate([used, np.setdiff1d(np.arange(len(kv)), used)])
    ordered, ends = np.full_like(table, -1), np.cumsum(need)
    for b, p in enumerate(need):
        ordered[b, :p] = np.arange(ends[b] - p, ends[b])
    return kv[order], ordered


def reference(q, k, v) -> np.ndarray:
    """Decoding attention in float64: softmax(q k^T / sqrt(d)) v for one query token per sequence,
    query head h reading KV head h // (hq / hkv). q: (b, hq, d); k, v: (b, hkv, n, d)."""
    b, hq, d = q.shape
    group = check_heads(hq, k.shape[1])
    q = q.astype(np.float64).reshape(b, k.shape[1], group, d)
    s = np.einsum("bhgd,bhnd->bhgn", q, k.astype(np.float64)) / np.sqrt(d)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    o = np.einsum("bhgn,bhnd->bhgd", p / p.sum(axis=-1, keepdims=True), v.astype(np.float64))
    return o.reshape(b, hq, d)


def reference_paged(q, kv, table, lengths, page: int = PAGE) -> np.ndarray:
    """`reference` per sequence, its keys and values gathered by the page walk."""
    check_paged(kv, table, lengths, page)
    out = []
    for b, n in enumerate(lengths):
        k, v = gather(kv, table[b], int(n), page)
        out.append(reference(q[b:b + 1], k[None], v[None]))
    return np.concatenate(out)


def tvm_layout(table, lengths, page: int = PAGE) -> list[np.ndarray]:
    """The same block table as TVM's and FlashInfer's kernels take it: the pages of all sequences in
    one list (indptr, indices) and the tokens on each last page."""
    need = [-(-int(n) // page) for n in lengths]
    indptr = np.concatenate([[0], np.cumsum(need)]).astype("int32")
    indices = np.concatenate([table[b, :p] for b, p in enumerate(need)]).astype("int32")
    last = np.array([int(n) - (p - 1) * page for n, p in zip(lengths, need)], "int32")
    return [indptr, indices, last]


def tvm_decode(hq: int, hkv: int, d: int, target):
    """TVM's own paged decode kernel (tvm.relax.frontend.nn.llm, as MLC-LLM runs it), its scalar
    arguments fixed (no rotary embedding, scale 1/sqrt(d)), as an IRModule whose main takes q, the
    cache, (indptr, indices, last page lengths), two position offsets, o and the log-sum-exp."""
    import tvm
    from tvm.relax.frontend.nn.llm import _decode_kernels

    f = _decode_kernels._attention_decode(hkv, hq, d, "float16", False, {}, target)
    scalars = {p.name: p for p in f.params[-4:]}
    f = f.specialize({scalars["rotary_mode"]: 0, scalars["rope_scale"]: 1.0, scalars["rope_theta"]: 1e4,
                      scalars["sm_scale"]: d ** -0.5})
    return tvm.IRModule({"main": f.with_attr("global_symbol", "main")})


def tvm_decode_args(q, kv, table, lengths, page: int = PAGE) -> list[np.ndarray]:
    """The arrays TVM's decode kernel takes for the same step (o, the output, second to last)."""
    b, hq, d = q.shape
    zeros = np.zeros(b, "int32")
    return [q, kv, *tvm_layout(table, lengths, page), zeros, zeros, np.empty_like(q), np.empty((b, hq), "float32")]


def sdpa_gqa(torch, q, k, v):
    """torch's attention for one query per sequence: q (b, hq, d) against k, v (b, hkv, n, d)."""
    return torch.nn.functional.scaled_dot_product_attention(q[:, :, None], k, v, enable_gqa=True)[:, :, 0]


@functools.cache
def _compiled_flex_attention():
    from torch.nn.attention.flex_attention import flex_attention
    import torch

    return torch.compile(flex_attention, dynamic=False)


def flex_gqa(torch, q, k, v):
    """torch's flex_attention on the same arrays as `sdpa_gqa`, compiled by triton (once per shape,
    in the warm-up calls): with one query row it runs torch's flex-decoding kernel, which splits
    the keys across blocks as split-KV does."""
    return _compiled_flex_attention()(q[:, :, None], k, v, enable_gqa=True)[:, :, 0]


def split_outputs(b: int, splits: int, hq: int = HQ, d: int = D) -> list[np.ndarray]:
    """The split kernels' last three arrays: each split's O_s (fp32) and L_s, then the output."""
    return [np.empty((b, splits, hq, d), "float32"), np.empty((b, splits, hq), "float32"), np.empty((b, hq, d), "float16")]


def padded_sdpa(q, kv, table, lengths):
    """torch's attention without a paged kernel, on torch CUDA tensors: each sequence's keys gathered
    through the block table, padded to the longest, the padding masked."""
    import torch

    n = int(lengths.max())
    t = torch.arange(n, device=q.device)
    k, v = kv[table[:, t // PAGE], :, :, t % PAGE].permute(2, 0, 3, 1, 4)  # (b, n, 2, hkv, d) -> 2 x (b, hkv, n, d)
    mask = (t < lengths[:, None])[:, None, None]
    return torch.nn.functional.scaled_dot_product_attention(q[:, :, None], k, v, attn_mask=mask, enable_gqa=True)[:, :, 0]


def pool_size(lengths, page: int = PAGE, spare: int = 3) -> tuple[int, int]:
    """(pages in the pool, columns of the block table) that `paged_cache` makes for these lengths."""
    need = [-(-int(n) // page) for n in lengths]
    return sum(need) + spare, max(need)


def from_torch(nb, name: str, ours, theirs, arrays):
    """`ours(*tensors)` on torch CUDA copies of `arrays`, checked against `theirs` and timed in
    alternating rounds with it; where nothing runs, the records (or a line saying there are none)."""
    names = (f"{name}, torch sdpa padded", name)
    if not nb.live:
        found = [nb.recorded_or_live(n) for n in names]
        print(*(m if m is not None else f"{n}: no record yet (it runs where a GPU is)" for m, n in zip(found, names)),
              sep="\n")
        return found[1]
    import torch

    from . import baselines
    t = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in arrays]
    with torch.no_grad():
        mine, want = ours(*t).float(), theirs(*t).float()
        err = float((mine - want).norm() / want.norm())
        rounds = [baselines.event_rounds(lambda f=f: f(*t), torch.cuda.Event, torch.cuda.synchronize)
                  for f in (ours, theirs)]
        ours_ms, theirs_ms, ratio = baselines.interleaved(*rounds, 10)
    base = nb.record(names[0], float(np.median(theirs_ms)))
    m = nb.record(name, float(np.median(ours_ms)), rel_err=err, ratio=ratio,
                  ratio_quartiles=baselines.ratio_quartiles(ours_ms, theirs_ms), versus=base.name)
    print(base, m, sep="\n")
    return m


def merge_kernel(merge_two, B: int, H: int):
    """The exercise's kernel around the student's macro: a block per (sequence, head), a thread per
    dim, merging the states (O1, L1) and (O2, L2) into (O, L)."""
    from tvm.script import tirx as T

    @T.prim_func
    def main(O1: T.Buffer((B, H, D), "float32"), L1: T.Buffer((B, H), "float32"), O2: T.Buffer((B, H, D), "float32"),
             L2: T.Buffer((B, H), "float32"), O: T.Buffer((B, H, D), "float32"), L: T.Buffer((B, H), "float32")):
        T.device_entry()
        b, h = T.cta_id([B, H])
        d = T.thread_id([D])
        big, w1, w2 = T.alloc_local((1,), "float32"), T.alloc_local((1,), "float32"), T.alloc_local((1,), "float32")
        merge_two(O, L, O1, L1, O2, L2, b, h, d, big, w1, w2)
    return main


def check_merge_exercise(nb, merge_two, merge_states) -> str:
    """The exercise of notebook 12: build the student's merge of two states (a macro) into a kernel,
    check its CUDA, and on a GPU its numbers against `merge_states`; one line saying what is right
    or what to fix."""
    import tvm

    try:
        kernel = merge_kernel(merge_two, 4, HQ)
    except tvm.error.DiagnosticError as err:
        if "ellipsis" in str(err):
            return "Exercise: not attempted yet"
        raise
    ex = nb.build(kernel, tir_pipeline="tirx")
    src = ex.mod.imports[0].inspect_source()
    body = src[src.rindex("main_kernel("):]
    for wrong, hint in [("max(" not in body, "subtract the larger log-sum-exp, M = T.max(L1, L2), before T.exp2"),
                        (body.count("exp2f(") < 2, "weight each state by T.exp2(L_s - M)"),
                        ("O_ptr[" not in body, "write the merged output into O"),
                        ("log2f(" not in body or "L_ptr[" not in body, "write the merged L = M + T.log2(w1 + w2)")]:
        if wrong:
            return f"not yet: {hint}"
    if nb.live:
        g = np.random.default_rng(4)
        o1, o2 = (g.standard_normal((4, HQ, D)).astype("float32") for _ in range(2))
        l1, l2 = ((g.standard_normal((4, HQ)) * 30).astype("float32") for _ in range(2))
        l2[0, 0] = -1e30  # a split with no keys
        dev = tvm.cuda(0)
        args = [tvm.runtime.tensor(x, dev) for x in (o1, l1, o2, l2, np.empty_like(o1), np.empty_like(l1))]
        ex.mod["main"](*args)
        o, lse = merge_states(np.stack([o1, o2]).astype(np.float64), np.stack([l1, l2]).astype(np.float64))
        if not (np.allclose(args[4].numpy(), o, rtol=1e-4, atol=1e-4) and np.allclose(args[5].numpy(), lse, rtol=1e-4)):
            return "not yet: the merged numbers differ from merge_states'"
    return "Exercise: right"


#: the sweep: batch x context, each point at most SWEEP_TOKENS cached tokens (the pool's int32
#: offsets stay below 2^31); the kinds of kernel it measures, each named "<kind> <b>x<n>k"
SWEEP_BATCHES = [1, 8, 32, 128]
SWEEP_CONTEXTS = [1024, 8192, 32768, 131072]
SWEEP_TOKENS = 1 << 19
SWEEP_KINDS = ["split-KV, paged, one wave", "TVM decode kernel", "torch sdpa, enable_gqa", "torch flex_attention",
               "copy of the same bytes"]


def sweep_points() -> list[tuple[int, int]]:
    """(batch, context) pairs of the sweep that fit SWEEP_TOKENS cached tokens (2 GiB of fp16 K and V)."""
    return [(b, n) for b in SWEEP_BATCHES for n in SWEEP_CONTEXTS if b * n <= SWEEP_TOKENS]


def sweep_label(b: int, n: int) -> str:
    return f"{b}x{n // 1024}k"


def run_sweep(nb, kernel, plan_for) -> None:
    """On a GPU: every sweep point's paged kernel (`kernel(b, HQ, HKV, D, pages, table columns, splits,
    chunk)` with `plan_for(b, n)` = (splits, chunk)), TVM's and torch's, each checked, timed in rounds
    with the copy of the same bytes; the paged kernel once more in rounds with SDPA, so that its ratio
    to the fastest baseline has a spread too."""
    for b, n in sweep_points():
        label = sweep_label(b, n)
        q = queries(b)
        kv, table, lengths = paged_cache([n] * b)
        ref = []

        def expected():  # the float64 reference, once for the two kernels
            if not ref:
                ref.append(reference_paged(q, kv, table, lengths))
            return ref[0]
        counts = dict(bytes=decode_bytes(lengths), flops=decode_flops(lengths))
        copy = nb.torch_op(f"copy of the same bytes {label}", lambda torch, x: x.clone(),
                           [np.empty(int(counts["bytes"]) // 4, "float16")], bytes=counts["bytes"], quiet=True)
        dense = np.stack([gather(kv, table[i], n) for i in range(b)])  # (b, 2, hkv, n, d)
        qkv = [q, *(np.ascontiguousarray(dense[:, i]) for i in (0, 1))]
        del dense
        sdpa = nb.torch_op(f"torch sdpa, enable_gqa {label}", sdpa_gqa, qkv, **counts, quiet=True)
        nb.torch_op(f"torch flex_attention {label}", flex_gqa, qkv, **counts, quiet=True)
        del qkv
        splits, chunk = plan_for(b, n)
        args = [q, kv, table, lengths, np.empty((b, splits, HQ, D), "float32"), np.empty((b, splits, HQ), "float32"),
                np.empty_like(q)]
        ours = kernel(b, HQ, HKV, D, *pool_size([n] * b), splits, chunk)
        for name, baseline in ((f"{SWEEP_KINDS[0]} {label}", copy), (f"{SWEEP_KINDS[0]}, in rounds with SDPA {label}", sdpa)):
            nb.measure(name, ours, args, expected, tol=2e-3, baseline=baseline, quiet=True, tir_pipeline="tirx", **counts)
        nb.measure(f"TVM decode kernel {label}", tvm_decode(HQ, HKV, D, nb.target), tvm_decode_args(q, kv, table, lengths),
                   expected, tol=2e-3, out=-2, baseline=copy, quiet=True, **counts)


def sweep_chart(nb, kinds: list[str], ceiling: float | None = None):
    """The sweep's recorded (or just measured) points, one line per kind of kernel, GB/s against the
    (batch, context) pairs; 'no record yet' where there are none."""
    from . import plots
    from .measurement import Measurement

    points = sweep_points()
    names = {kind: [f"{kind} {sweep_label(b, n)}" for b, n in points] for kind in kinds}
    series = {kind: [nb.recorded_or_live(name) or Measurement(name, None, source="missing") for name in ns]
              for kind, ns in names.items()}
    if not any(m.ok for ms in series.values() for m in ms):
        print("no record yet of the sweep on this GPU: it runs where a GPU is")
        return None
    return plots.sweep([sweep_label(b, n) for b, n in points], series, xlabel="batch x context", ceiling=ceiling,
                       ceiling_label="copy (ceiling)", title="Decoding, fp16, 32 query heads on 8 KV heads")
