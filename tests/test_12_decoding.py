"""Notebook 12 (decoding) on the CPU: the merge of partial states in NumPy (two halves, or any
splits, give the whole; a split with no keys weighs nothing), the page walk (a paged cache read
back through its block table is the dense cache; split-KV over pages as `plan` cuts it, merged,
is the float64 reference, for lengths of 1, mid-page and whole pages), the refusals (a page
outside the cache, a length above the pages given, head counts that do not group), the plan, the
kernels' CUDA for every architecture (shuffles, two kernels, the table lookup), and the exercise
with its solution and wrong answers. On a GPU: every kernel, and TVM's, against the float64
reference on odd lengths and shuffled pages with garbage in the unused ones."""

import numpy as np
import pytest

import helpers
from helpers import decode, decode_mma, decode_steps
from test_exercises import run_exercise, solution

NB = "12_decoding"
EXERCISE = "def merge_two(O, L, O1, L1, O2, L2, b, h, d, big, w1, w2):"
SOLUTION = solution(NB, "## 11. Exercise")
ODD = [1, 17, 40, 16, 1000, 4099]  # one token, mid-page, whole pages, longer


@pytest.fixture(scope="module")
def nb12():
    """The notebook's kernels, macros, plan and NumPy merge (its exported cells)."""
    return helpers.lessons.lesson(NB)


def cuda(kernel, arch):
    return helpers.build(kernel, arch, tir_pipeline="tirx").mod.imports[0].inspect_source()


# ------------------------------------------------------------------ the merge

@pytest.mark.parametrize("cuts", [[500], [1, 999], [100, 200, 700], [999]])
def test_merged_splits_are_the_whole(nb12, cuts):
    g = np.random.default_rng(0)
    q, k, v = g.standard_normal((4, 128)) * 5, g.standard_normal((1000, 128)), g.standard_normal((1000, 128))
    edges = [0, *cuts, 1000]
    parts = [nb12.partial_state(q, k[a:b], v[a:b]) for a, b in zip(edges, edges[1:])]
    o, lse = nb12.merge_states(np.stack([p[0] for p in parts]), np.stack([p[1] for p in parts]))
    whole, whole_lse = nb12.partial_state(q, k, v)
    np.testing.assert_allclose(o, whole, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lse, whole_lse, rtol=1e-12)
    s = q @ k.T / np.sqrt(128)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    np.testing.assert_allclose(whole, p @ v / p.sum(axis=1, keepdims=True), rtol=1e-10, atol=1e-12)


def test_a_split_without_keys_weighs_nothing(nb12):
    """The kernels write L = -1e30 and O = 0 for a split past a sequence's end."""
    g = np.random.default_rng(1)
    o1, l1 = g.standard_normal((4, 128)), g.standard_normal(4) * 100
    o, lse = nb12.merge_states(np.stack([o1, np.zeros_like(o1)]), np.stack([l1, np.full(4, -1e30)]))
    np.testing.assert_allclose(o, o1)
    np.testing.assert_allclose(lse, l1)


def test_large_logits_do_not_overflow(nb12):
    o, lse = nb12.merge_states(np.ones((2, 1, 4)), np.array([[3000.0], [2999.0]]))
    assert np.isfinite(o).all() and np.isfinite(lse).all()
    np.testing.assert_allclose(lse, 3000 + np.log2(1.5))


# ------------------------------------------------------------------ the page walk

def test_the_page_walk_reads_back_each_sequence():
    kv, table, lengths = decode.paged_cache(ODD, hkv=2)
    assert len(kv) == sum(-(-n // 16) for n in ODD) + 3  # 3 pages no sequence owns
    used = np.concatenate([table[b, :-(-n // 16)] for b, n in enumerate(ODD)])
    assert len(set(used)) == len(used) and set(used) < set(range(len(kv)))  # no page shared, some spare
    for b, n in enumerate(ODD):
        seq = decode.gather(kv, table[b], n)
        assert seq.shape == (2, 2, n, 128)
        assert np.abs(seq).max() < decode.GARBAGE_K  # no garbage row read
    spare = sorted(set(range(len(kv))) - set(used))
    assert (kv[spare, 0] == decode.GARBAGE_K).all() and (kv[spare, 1] == decode.GARBAGE_V).all()
    tail = kv[table[1, 1], :, :, 17 - 16:]  # sequence 1's last page holds one token, then garbage
    assert (tail[0] == decode.GARBAGE_K).all()


def test_the_paged_reference_is_the_dense_one():
    kv, table, lengths = decode.paged_cache([40, 40], hkv=2)
    q = decode.queries(2, hq=8)
    dense = np.stack([decode.gather(kv, table[b], 40) for b in range(2)])  # (b, 2, hkv, n, d)
    np.testing.assert_allclose(decode.reference_paged(q, kv, table, lengths),
                               decode.reference(q, dense[:, 0], dense[:, 1]), rtol=1e-12)


def test_split_kv_over_pages_as_planned_is_the_reference(nb12):
    """What the paged kernels compute, in NumPy: each split's keys found page by page, its state,
    then the merge; for every sequence, with the plan's chunks (whole pages)."""
    kv, table, lengths = decode.paged_cache(ODD, hkv=2)
    q = decode.queries(len(ODD), hq=8)
    splits, chunk = nb12.plan(len(ODD), max(ODD), sms=132, kv_heads=2)
    assert chunk % 16 == 0 and splits * chunk >= max(ODD) > (splits - 1) * chunk
    want = decode.reference_paged(q, kv, table, lengths)
    for b, n in enumerate(ODD):
        k, v = decode.gather(kv, table[b], n)
        for h in range(2):
            parts = [nb12.partial_state(q[b, 4 * h:4 * h + 4], k[h, s * chunk:(s + 1) * chunk], v[h, s * chunk:(s + 1) * chunk])
                     for s in range(splits) if s * chunk < n]
            o, _ = nb12.merge_states(np.stack([p[0] for p in parts]), np.stack([p[1] for p in parts]))
            np.testing.assert_allclose(o, want[b, 4 * h:4 * h + 4], rtol=1e-10, atol=1e-12)


def test_tvm_gets_the_same_table_as_page_lists():
    kv, table, lengths = decode.paged_cache([1, 17, 32], hkv=2)
    indptr, indices, last = decode.tvm_layout(table, lengths)
    assert list(indptr) == [0, 1, 3, 5]
    assert list(indices) == [table[0, 0], table[1, 0], table[1, 1], table[2, 0], table[2, 1]]
    assert list(last) == [1, 1, 16]


# ------------------------------------------------------------------ the plan

@pytest.mark.parametrize("batch, length, sms, want", [(1, 8192, 132, (16, 512)), (8, 8192, 132, (9, 912)),
                                                      (64, 8192, 132, (2, 4096)), (128, 8192, 132, (1, 8192)),
                                                      (1, 100, 132, (1, 112)), (8, 16384, 108, (7, 2352))])
def test_the_plan(nb12, batch, length, sms, want):
    assert nb12.plan(batch, length, sms) == want


@pytest.mark.parametrize("batch", [1, 3, 8, 128])
@pytest.mark.parametrize("length", [1, 17, 1000, 8192, 131072])
def test_the_plan_covers_every_key_in_whole_pages(nb12, batch, length):
    splits, chunk = nb12.plan(batch, length, 132)
    assert chunk % 16 == 0 and splits >= 1
    assert (splits - 1) * chunk < length <= splits * chunk  # no split is empty for the longest sequence
    assert splits == 1 or chunk >= 512


@pytest.mark.parametrize("batch, length, sms, want", [(1, 131072, 132, (49, 2688)), (8, 8192, 132, (6, 1376)),
                                                      (32, 8192, 132, (1, 8192)), (1, 1024, 132, (16, 64)),
                                                      (8, 16384, 132, (6, 2736)), (1, 100, 40, (4, 32))])
def test_the_plan_for_one_wave(nb12, batch, length, sms, want):
    splits, chunk = nb12.plan_one_wave([length] * batch, sms)
    assert (splits, chunk) == want
    assert batch * 8 * splits <= 3 * sms or splits == 1  # never a second wave of blocks
    assert (splits - 1) * chunk < length <= splits * chunk and chunk % 16 == 0
    splits2, chunk2 = nb12.plan_one_wave([length] * batch, sms, per_sm=2)  # the tensor-core kernels': 2 an SM
    assert batch * 8 * splits2 <= 2 * sms or splits2 == 1
    assert splits2 <= splits and (splits2 - 1) * chunk2 < length <= splits2 * chunk2


@pytest.mark.parametrize("lengths", [[1, 16384, 8191, 4100, 12000, 8192, 17, 12803], [65536, 3000, 40000, 700],
                                     [5] * 3 + [20000]])
def test_the_plan_for_one_wave_counts_the_keys_a_mixed_batch_has(nb12, lengths):
    """The blocks that have keys (a split past a sequence's end has none) fill one wave, and one page
    less a chunk would not fit; the longest sequence is covered, every chunk whole pages."""
    splits, chunk = nb12.plan_one_wave(lengths, 132)
    busy = lambda c: 8 * sum(-(-n // c) for n in lengths)  # noqa: E731
    assert busy(chunk) <= 3 * 132 < busy(chunk - 16) and chunk % 16 == 0
    assert (splits - 1) * chunk < max(lengths) <= splits * chunk
    assert splits > nb12.plan_one_wave([max(lengths)] * len(lengths), 132)[0]  # shorter chunks than by the longest


@pytest.mark.parametrize("lengths, sms", [([8192] * 8, 0), ([], 132), ([100, 0], 132)])
def test_the_plan_for_one_wave_refuses_nonsense(nb12, lengths, sms):
    with pytest.raises(ValueError, match="must be positive"):
        nb12.plan_one_wave(lengths, sms)


# ------------------------------------------------------------------ the refusals

@pytest.mark.parametrize("call, message", [
    (lambda: decode.check_heads(32, 6), "32 query heads are not a multiple of 6 KV heads"),
    (lambda: decode.check_heads(32, 8, 64), "head dimension 64 is not supported: the kernels take 128"),
    (lambda: decode.check_heads(32, 0), "must be a positive integer"),
])
def test_heads_that_do_not_group_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_kernels_refuse_heads_that_do_not_group(nb12):
    with pytest.raises(ValueError, match="32 query heads are not a multiple of 6 KV heads"):
        nb12.decode_per_head(2, 64, 32, 6, 128)
    with pytest.raises(ValueError, match="32 query heads are not a multiple of 5 KV heads"):
        nb12.decode_split(2, 64, 32, 5, 128, 2, 32)
    with pytest.raises(ValueError, match="head dimension 64 is not supported"):
        decode_steps.decode_paged(2, 32, 8, 64, 10, 4, 1, 64)


def bad_table():
    kv, table, lengths = decode.paged_cache([40, 17], hkv=2, live=False)
    return kv, table.copy(), lengths.copy()


@pytest.mark.parametrize("spoil, message", [
    (lambda kv, t, n: t.__setitem__((0, 1), len(kv)), "sequence 0 names page 8, outside the cache's 8 pages"),
    (lambda kv, t, n: t.__setitem__((1, 0), -1), "sequence 1 names page -1, outside the cache's 8 pages"),
    (lambda kv, t, n: n.__setitem__(1, 49), "sequence 1 has length 49, above the 3 pages of 16 tokens"),
    (lambda kv, t, n: n.__setitem__(0, 0), "sequence 0 has length 0: a decoding step needs at least one token"),
])
def test_a_bad_block_table_is_refused(spoil, message):
    kv, table, lengths = bad_table()
    decode.check_paged(kv, table, lengths)  # sound as made
    spoil(kv, table, lengths)
    with pytest.raises(ValueError, match=message):
        decode.check_paged(kv, table, lengths)


def test_a_page_past_a_short_sequence_is_not_its_business():
    """Columns of the table beyond a sequence's last page are never read, so they may hold anything."""
    kv, table, lengths = bad_table()
    table[1, 2] = 10**6
    decode.check_paged(kv, table, lengths)


def test_a_cache_of_the_wrong_layout_is_refused():
    kv, table, lengths = bad_table()
    with pytest.raises(ValueError, match=r"the cache has shape \(8, 2, 2, 128, 16\), not \(pages, 2, kv heads, 16, d\)"):
        decode.check_paged(kv.transpose(0, 1, 2, 4, 3), table, lengths)
    with pytest.raises(ValueError, match="one row of page indices and one length per sequence"):
        decode.check_paged(kv, table, lengths[:1])


def test_the_plan_refuses_nonsense(nb12):
    with pytest.raises(ValueError, match="must be positive"):
        nb12.plan(0, 8192, 132)


# ------------------------------------------------------------------ the kernels' code

@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90"])
def test_the_kernels_build_with_their_structure(nb12, arch):
    per_head = cuda(nb12.decode_per_head(2, 1024, 32, 8, 128), arch)
    split = cuda(nb12.decode_split(2, 1000, 32, 8, 128, 2, 512), arch)
    paged = cuda(decode_steps.decode_paged(3, 32, 8, 128, 20, 4, 2, 32), arch)
    for src in (per_head, split, paged):
        assert "__shfl_xor_sync" in src and "exp2f" in src  # the 16 lanes' sum, the online softmax
        assert "uint4" in src  # a key's 16 bytes per lane in one load
    assert "main_kernel_1" not in per_head
    for src in (split, paged):
        assert "main_kernel_1(" in src and "log2f" in src  # the merge: a second kernel; L = M + log2(l)
    assert "table_ptr[" in paged and "lengths_ptr[" in paged and "table_ptr" not in split


@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_more_bytes_in_flight(arch):
    """Four keys a row: eight 16-byte loads of K and V issued before the first score; ahead: the next
    step's eight loads come before this step's shuffles in the loop."""
    keys = cuda(decode_steps.decode_paged_keys(3, 32, 8, 128, 40, 32, 2, 256), arch)
    ahead = cuda(decode_steps.decode_paged_ahead(3, 32, 8, 128, 40, 32, 2, 256), arch)
    for src in (keys, ahead):
        loop = src[src.index("for (int i = 0"):]
        first_score = loop.index("warp_reduce_sum")
        assert loop[:first_score].count("*(uint4*)(KV_ptr") == 2 * decode_steps.KEYS
    before_loop = ahead[:ahead.index("for (int i = 0")]
    assert before_loop.count("*(uint4*)(KV_ptr") == 2 * decode_steps.KEYS  # step 0's keys, loaded ahead
    assert keys[:keys.index("for (int i = 0")].count("*(uint4*)(KV_ptr") == 0


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_90"])
def test_the_tensor_core_kernels_build_with_their_structure(arch):
    """Per page a warp issues 16 mma for S and 8 for P V: 24 calls of TVM's mma helper in the CUDA; the register kernel turns V by movmatrix, the staged one by ldmatrix.trans out of a
    cp.async ring whose 96 KiB, with the merge's buffer inside it, fit the 99 KB of sm_86 and sm_89."""
    shape = (3, 32, 8, 128, 40, 32, 2, 256)
    regs, staged = (cuda(k(*shape), arch) for k in (decode_mma.decode_paged_mma, decode_mma.decode_paged_mma_async))
    for src in (regs, staged):
        assert src.count("ptx_mma_sync_aligned_m16n8k16_row_col_f32_f16_f16_f32(") == 1 + 24  # its definition, 24 calls
        assert "main_kernel_1(" in src  # 2 splits: the merge
    assert "movmatrix" in regs and "cp_async" not in regs and "ldmatrix" not in regs
    assert "ptx_cp_async_cg_async_cg_shared_global_16" in staged and "ldmatrix_sync_aligned_m8n8_x4_trans" in staged
    assert "movmatrix" not in staged and "so_ptr[" not in staged  # `so` is a view of the stages
    assert decode_mma.WARPS * decode_mma.STAGES * 2 * decode_mma.PAGE * 128 * 2 + 2 * 4 * 32 <= 99 * 1024


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_tensor_core_kernels_read_a_page_number_once_a_page(arch):
    """Each place that loads a page reads its number from the block table once: 2 in the register kernel (the
    first page, the next in the loop), 3 in the staged one (its two first pages, the loop's). Read in every
    copy instead, the number is reloaded after each cp.async (an asm with a memory clobber) or under each
    row's test: 48 and 32 reads, 12 M instructions more at 32x8k on the H200 (gpu/experiments/decode_mma_lean.py)."""
    shape = (3, 32, 8, 128, 40, 32, 2, 256)
    regs, staged = (cuda(k(*shape), arch) for k in (decode_mma.decode_paged_mma, decode_mma.decode_paged_mma_async))
    assert regs.count("table_ptr[") == 2 and staged.count("table_ptr[") == 3
    whole = staged[staged.index("pg_ptr[0] = table_ptr["):]
    whole = whole[:whole.index("} else {")]  # a whole page: its 16 copies under no test of the key
    assert whole.count("ptx_cp_async_cg_async_cg_shared_global_16(") == 16
    tests = [line for line in whole.splitlines() if "if (" in line]
    assert len(tests) == 1 and "<= (lengths_ptr[" in tests[0]  # the one test: is the page whole?


def test_the_tensor_core_kernels_refuse_what_their_layout_cannot_hold():
    for kwargs, what in [(dict(page=8), "page 8"), (dict(chunk=100), "chunk 100"), (dict(D=64), "head dimension 64")]:
        args = dict(B=2, HQ=32, HKV=8, D=128, pages=10, max_pages=4, splits=1, chunk=64) | kwargs
        with pytest.raises(ValueError, match=what):
            decode_mma.decode_paged_mma_async(**args)
    with pytest.raises(ValueError, match="at most 8 query heads a KV head; got .* 16 heads"):
        decode_mma.decode_paged_mma(2, 32, 2, 128, 10, 4, 1, 64)
    with pytest.raises(ValueError, match="32 query heads are not a multiple of 6 KV heads"):
        decode_mma.decode_paged_mma(2, 32, 6, 128, 10, 4, 1, 64)


@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_one_split_needs_no_merge(arch):
    """decode_paged_wave is decode_paged_ahead where there is more than one split (the same CUDA);
    with one split it writes O in its one kernel, and launches no merge."""
    shape = (3, 32, 8, 128, 40, 32)
    ahead = cuda(decode_steps.decode_paged_ahead(*shape, 2, 256), arch)
    assert cuda(decode_steps.decode_paged_wave(*shape, 2, 256), arch) == ahead
    one = cuda(decode_steps.decode_paged_wave(*shape, 1, 512), arch)
    assert "main_kernel_1" not in one and "O_ptr[" in one
    assert "log2f" not in one and "Op_ptr[" not in one and "LSE_ptr[" not in one  # no partial state written


def test_tvm_decode_kernel_builds():
    mod = decode.tvm_decode(32, 8, 128, helpers.env.make_target("sm_80"))
    assert [p.name for p in mod["main"].params] == ["Q", "pages", "page_table_indptr", "page_table_values", "length_info",
                                                     "k_rope_pos_offset", "q_rope_position", "output", "lse"]
    helpers.build(mod, "sm_80")


class FakeSession:
    """What run_sweep asks of a session, without a GPU: each kernel's arrays checked against its
    buffers, each reference computed, each baseline's arrays kept."""

    def __init__(self):
        self.calls = []

    def torch_op(self, name, fn, arrays, **kw):
        self.calls.append((name, [a.shape for a in arrays], kw))
        return name

    def measure(self, name, kernel, args, expected, out=-1, baseline=None, **kw):
        helpers.bench.check_args(kernel, args)
        assert expected().shape == args[out].shape
        assert np.isfinite(expected()).all()
        self.calls.append((name, [a.shape for a in args], kw | {"baseline": baseline}))


def test_the_sweep_hands_each_kernel_its_arrays(nb12, monkeypatch):
    monkeypatch.setattr(decode, "SWEEP_BATCHES", [1, 3])
    monkeypatch.setattr(decode, "SWEEP_CONTEXTS", [40, 100])
    monkeypatch.setattr(decode, "SWEEP_TOKENS", 150)
    nb = FakeSession()
    nb.target = helpers.env.make_target("sm_80")
    decode.run_sweep(nb, decode_steps.decode_paged_wave, lambda b, n: nb12.plan_one_wave([n] * b, 132))
    names = [c[0] for c in nb.calls]
    assert names == [f"{kind} {b}x{n // 1024}k" for b, n in [(1, 40), (1, 100), (3, 40)]
                     for kind in ["copy of the same bytes", "torch sdpa, enable_gqa", "torch flex_attention",
                                 "split-KV, paged, one wave", "split-KV, paged, one wave, in rounds with SDPA",
                                 "TVM decode kernel"]]
    sdpa, flex = ([c for c in nb.calls if c[0].startswith(name)][-1] for name in ("torch sdpa", "torch flex"))
    assert sdpa[1] == flex[1] == [(3, 32, 128), (3, 8, 40, 128), (3, 8, 40, 128)]  # the same dense arrays
    rounds = {c[0].rsplit(" ", 1)[0]: c[2]["baseline"].rsplit(" ", 1)[0] for c in nb.calls if "baseline" in c[2]}
    assert rounds == {"split-KV, paged, one wave": "copy of the same bytes", "TVM decode kernel": "copy of the same bytes",
                      "split-KV, paged, one wave, in rounds with SDPA": "torch sdpa, enable_gqa"}


def test_pages_in_order_hold_the_same_cache_side_by_side():
    q = decode.queries(3)
    kv, table, lengths = decode.paged_cache([100, 33, 1], spare=4)
    kv2, table2 = decode.pages_in_order(kv, table, lengths)
    assert kv2.shape == kv.shape and table2.shape == table.shape
    assert table2[0, :7].tolist() == list(range(7)) and table2[1, :3].tolist() == [7, 8, 9] and table2[2, 0] == 10
    assert (table2 == -1).sum() == (table == -1).sum()
    for b, n in enumerate(lengths):
        assert np.array_equal(decode.gather(kv2, table2[b], n), decode.gather(kv, table[b], n))
    assert np.array_equal(decode.reference_paged(q, kv2, table2, lengths), decode.reference_paged(q, kv, table, lengths))
    assert sorted(map(bytes, kv2.reshape(len(kv2), -1))) == sorted(map(bytes, kv.reshape(len(kv), -1)))  # a permutation


# ------------------------------------------------------------------ on a GPU: the numbers

needs_gpu = pytest.mark.skipif(not helpers.gpu_available(), reason="runs the kernels: needs a GPU")


def run(kernel, args, out=-1, tirx=True):
    import tvm
    dev = tvm.cuda(0)
    ex = helpers.build(kernel, helpers.env.make_target(), tir_pipeline="tirx" if tirx else "default")
    t = [tvm.runtime.tensor(np.full_like(a, np.nan) if i == len(args) + out and a.dtype.kind == "f" else a, dev)
         for i, a in enumerate(args)]
    ex.mod["main"](*t)
    dev.sync()
    return t[out].numpy()


def close(got, want, tol=2e-3):
    err = np.linalg.norm(got.astype(np.float64) - want) / np.linalg.norm(want)
    assert err < tol, err


@needs_gpu
@pytest.mark.parametrize("n", [8, 1000, 4096])
def test_the_dense_kernels_on_a_gpu(nb12, n):
    q = decode.queries(3)
    k, v = decode.dense_cache(3, n)
    want = decode.reference(q, k, v)
    if n % 8 == 0:
        close(run(nb12.decode_per_head(3, n, 32, 8, 128), [q, k, v, np.empty_like(q)]), want)
    for splits, chunk in [nb12.plan(3, n, 132), (3, -(-n // 3 // 16) * 16)]:
        close(run(nb12.decode_split(3, n, 32, 8, 128, splits, chunk), [q, k, v, *decode.split_outputs(3, splits)]), want)


@needs_gpu
@pytest.mark.parametrize("baseline", ["sdpa_gqa", "flex_gqa"])
def test_the_torch_baselines_compute_decoding_attention(baseline):
    """The sweep's torch baselines are timed, never checked there: here they are, against the float64
    reference, so that a ratio to them is a ratio to the same answer."""
    torch = pytest.importorskip("torch")
    q, (k, v) = decode.queries(2), decode.dense_cache(2, 1000)
    out = getattr(decode, baseline)(torch, *(torch.from_numpy(a).cuda() for a in (q, k, v)))
    assert helpers.bench.relative_error(out.float().cpu().numpy(), decode.reference(q, k, v)) < 2e-3


@needs_gpu
@pytest.mark.parametrize("lengths", [ODD, [1], [16, 16, 16], [5000, 3]])
def test_the_paged_kernel_and_tvms_on_a_gpu(nb12, lengths):
    b = len(lengths)
    q = decode.queries(b)
    kv, table, lengths = decode.paged_cache(lengths)
    want = decode.reference_paged(q, kv, table, lengths)
    one_wave = lambda b, n, sms: nb12.plan_one_wave(lengths, sms)  # noqa: E731  by the batch's own lengths
    mma_wave = lambda b, n, sms: nb12.plan_one_wave(lengths, sms, per_sm=2)  # noqa: E731  the tensor-core kernels'
    for sms in (132, 4):  # many splits, few
        for kernel, plan in [(decode_steps.decode_paged, nb12.plan), (decode_steps.decode_paged_keys, nb12.plan),
                             (decode_steps.decode_paged_ahead, nb12.plan), (decode_steps.decode_paged_ahead, one_wave),
                             (decode_steps.decode_paged_wave, one_wave),
                             (decode_steps.decode_paged_wave, lambda b, n, sms: nb12.cut(n, 1)),  # one split: no merge
                             (decode_mma.decode_paged_mma, mma_wave), (decode_mma.decode_paged_mma_async, mma_wave),
                             (decode_mma.decode_paged_mma_async, lambda b, n, sms: nb12.cut(n, 1))]:
            splits, chunk = plan(b, int(max(lengths)), sms)
            got = run(kernel(b, 32, 8, 128, len(kv), table.shape[1], splits, chunk),
                      [q, kv, table, lengths, *decode.split_outputs(b, splits)])
            close(got, want)
    close(run(decode.tvm_decode(32, 8, 128, helpers.env.make_target()), decode.tvm_decode_args(q, kv, table, lengths),
              out=-2, tirx=False), want)


@needs_gpu
def test_tvms_merge_of_two_states_is_the_lessons(nb12):
    """TVM's _merge_state_inplace, which the exercise rewrites, against the lesson's NumPy merge."""
    import tvm
    from tvm.relax.frontend.nn.llm import _decode_kernels
    g = np.random.default_rng(5)
    v1, v2 = (g.standard_normal((3, 32, 128)).astype("float16") for _ in range(2))
    s1, s2 = ((g.standard_normal((3, 32)) * 30).astype("float32") for _ in range(2))
    f = _decode_kernels._merge_state_inplace(32, 128, "float16", helpers.env.make_target())
    ex = helpers.build(tvm.IRModule({"main": f.with_attr("global_symbol", "main")}), helpers.env.make_target())
    dev = tvm.cuda(0)
    t = [tvm.runtime.tensor(x, dev) for x in (v1, s1, v2, s2)]
    ex.mod["main"](*t)
    o, lse = nb12.merge_states(np.stack([v1, v2]).astype(np.float64), np.stack([s1, s2]).astype(np.float64))
    close(t[0].numpy(), o)
    np.testing.assert_allclose(t[1].numpy(), lse, rtol=1e-5)


def test_the_sweep_chart_says_when_there_is_no_record(capsys):
    class NoRecords:
        def recorded_or_live(self, name):
            return None
    assert decode.sweep_chart(NoRecords(), decode.SWEEP_KINDS) is None
    assert "no record yet" in capsys.readouterr().out


# ------------------------------------------------------------------ the exercise

def test_the_exercise_with_its_solution(tmp_path, capsys):
    out = run_exercise(tmp_path, capsys, NB, ["helpers.start("], EXERCISE, SOLUTION)
    assert out.strip().endswith("Exercise: right"), out


@pytest.mark.parametrize("answer, hint", [
    (SOLUTION.replace("big[0] = T.max(L1[b, h], L2[b, h])", "big[0] = L1[b, h]"), "subtract the larger log-sum-exp"),
    (SOLUTION.replace("w2[0] = T.exp2(L2[b, h] - big[0])", "w2[0] = L2[b, h] - big[0]"), "weight each state"),
    (SOLUTION.replace("        L[b, h] = big[0] + T.log2(w1[0] + w2[0])", "        L[b, h] = big[0]"), "write the merged L"),
    (SOLUTION.replace("    O[b, h, d] = (w1[0] * O1[b, h, d] + w2[0] * O2[b, h, d]) / (w1[0] + w2[0])\n", ""),
     "write the merged output"),
    ("@T.macro\ndef merge_two(O, L, O1, L1, O2, L2, b, h, d, big, w1, w2):\n    ...\n", "Exercise: not attempted yet"),
])
def test_the_exercise_rejects_wrong_answers(tmp_path, capsys, answer, hint):
    assert answer != SOLUTION
    out = run_exercise(tmp_path, capsys, NB, ["helpers.start("], EXERCISE, answer)
    assert hint in out and "Exercise: right" not in out, out
