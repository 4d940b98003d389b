"""Notebook 11 (FlashAttention on Hopper) on the CPU: the instructions its kernels are written with,
as the generated CUDA shows them (wgmma fed by TMA, the register hand-over between warpgroups, two
products in flight and ping-pong in section 3's last step); ptxas serializing the first overlap
(C7514, as the prose says) and keeping every other step's wgmma asynchronous (no warning, no
spills); the work items a persistent grid walks; causal loops stopping at the diagonal; clear
errors for shapes the tiles do not take; and the exercise (the grouped walk a student writes,
checked on the CPU and, on a Hopper GPU, in the kernel against NumPy). On a Hopper GPU every step of the
ladder is also checked against attention in float32 at a small shape."""


import numpy as np
import pytest

import helpers
from helpers import attention_sweep, flash_hopper_persistent as walk, flash_hopper_steps as steps
from helpers.flash_hopper_softmax import P, ROUND, hopper_softmax, with_softmax
from test_exercises import run_exercise, solution

NB = "11_flash_attention_hopper"
WALK = "head = ...  # fill in"
CONTEXT = ["helpers.start(", "def causal_order("]


@pytest.fixture(scope="module")
def nb11_order():
    """The notebook's causal_order and busiest_block (NumPy: the grouped order and the balance it buys)."""
    from test_exercises import _definitions, _one
    namespace = {"np": np}
    exec(_definitions(_one(NB, "def causal_order(")), namespace)
    return namespace["causal_order"], namespace["busiest_block"]


@pytest.fixture(scope="module")
def nb11():
    """The notebook's kernels and macros (its exported cells, built on notebook 10's)."""
    return helpers.lessons.lesson(NB)


def cuda(kernel, arch="sm_90a"):
    return helpers.build(kernel, arch, tir_pipeline="tirx").mod.imports[0].inspect_source()


def steps_of(nb11):
    """Every step of the ladder: name -> make(bh, seq, dim, causal)."""
    hopper = nb11.hopper_flash_attention
    return {"plain": lambda *a: hopper(*a, nb11.consume),
            "overlap": lambda *a: hopper(*a, steps.consume_overlap),
            "peeled": lambda *a: hopper(*a, steps.consume_peeled),
            "ping-pong": lambda *a: hopper(*a, nb11.consume_overlapped),
            "persistent": lambda *a: walk.persistent_flash_attention(*a, 132),
            "a block per item": lambda *a: walk.persistent_flash_attention(*a, None),
            "in groups": lambda bh, *a: walk.persistent_flash_attention(bh, *a, 132, walk.in_groups(bh, 4)),
            "Hopper softmax": lambda *a: with_softmax(hopper_softmax(1), walk.persistent_flash_attention, *a, 132)}


def test_the_hopper_kernel_is_wgmma_fed_by_tma(nb11):
    src = cuda(nb11.hopper_flash_attention(16, 1024, 128), "sm_90a")
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in src
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" in src
    assert "setmaxnreg.dec.sync.aligned.u32 40" in src and "setmaxnreg.inc.sync.aligned.u32 232" in src
    # P V takes P from registers: wgmma's register form has four 32-bit A operands before B's descriptor
    assert "{%64, %65, %66, %67}" in src or "{%64,%65,%66,%67}" in src.replace(" ", "")


def test_the_overlapped_kernel_keeps_two_products_in_flight(nb11):
    src = cuda(nb11.hopper_flash_attention(16, 1024, 128, False, nb11.consume_overlapped), "sm_90a")
    assert "wgmma.wait_group.sync.aligned 1;" in src  # S done, P V still running: the softmax meanwhile
    assert "bar.sync" in src and "bar.arrive" in src  # ping-pong: the two consumers issue in turn
    plain = cuda(nb11.hopper_flash_attention(16, 1024, 128), "sm_90a")
    peeled = cuda(nb11.hopper_flash_attention(16, 1024, 128, False, steps.consume_peeled), "sm_90a")
    assert "wgmma.wait_group.sync.aligned 1;" not in plain and "bar.arrive" not in plain
    assert "wgmma.wait_group.sync.aligned 1;" in peeled and "bar.arrive" not in peeled


@pytest.mark.skipif(helpers.kernels.nvcc_path() is None, reason="ptxas' report needs nvcc")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("step", ["plain", "overlap", "peeled", "ping-pong", "persistent"])
def test_ptxas_serializes_only_the_unpeeled_overlap(nb11, step, causal):
    """What section 3's prose says: the overlap with a wgmma group under `if j + 1 < tiles` draws
    C7514 and ptxas serializes it; every other step keeps wgmma asynchronous. None spills."""
    ex = helpers.build(steps_of(nb11)[step](16, 1024, 128, causal), "sm_90a", tir_pipeline="tirx")
    report = helpers.kernels.compile_with_nvcc(ex, "sm_90a", "report")
    if step == "overlap":
        assert "(C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized" in report
    else:
        assert "Potential Performance Loss" not in report, report[-600:]
    assert "0 bytes spill stores, 0 bytes spill loads" in report


@pytest.mark.skipif(helpers.kernels.nvcc_path() is None, reason="ptxas' report needs nvcc")
@pytest.mark.parametrize("dim, share", [(64, 1), (128, 0)])
def test_the_hopper_softmax_keeps_wgmma_asynchronous(dim, share):
    """Section 4's last step: exponentials by ex2.approx.ftz, and at head dim 64 one in 8 by the polynomial
    (__fadd_rn), with no serialized wgmma and no spills; the kernel module's own softmax is notebook 10's
    again once the kernel is built."""
    kernel = with_softmax(hopper_softmax(share), walk.persistent_flash_attention, 16, 1024, dim, False, 132)
    ex = helpers.build(kernel, "sm_90a", tir_pipeline="tirx")
    src = ex.mod.imports[0].inspect_source()
    assert "ex2.approx.ftz.f32" in src and ("__fadd_rn" in src) == (share > 0)
    report = helpers.kernels.compile_with_nvcc(ex, "sm_90a", "report")
    assert "Potential Performance Loss" not in report, report[-600:]
    assert "0 bytes spill stores, 0 bytes spill loads" in report
    assert walk.online_softmax is helpers.lessons.lesson("10_flash_attention").online_softmax


def test_the_polynomial_exponential_is_within_fp16s_rounding():
    """exp2_fma's steps in float32: 2^x within 1.1e-4 (fp16's P keeps 4.9e-4) down to 2^-125, and below
    the clamp a tiny positive number, never a wrapped exponent (negative, infinite or NaN)."""
    x = np.concatenate([np.linspace(-130, 0, 200001), [-1e30, -np.inf]]).astype(np.float32)
    xc = np.maximum(x, np.float32(-126))
    r = xc + np.float32(ROUND)  # round(x) in the low mantissa bits
    f = xc - (r - np.float32(ROUND))
    p = ((np.float32(P[3]) * f + np.float32(P[2])) * f + np.float32(P[1])) * f + np.float32(P[0])
    y = (p.view(np.int32) + (r.view(np.int32) << 23)).view(np.float32)
    near = x > -125
    assert np.max(np.abs(y[near] / np.exp2(x[near].astype(np.float64)) - 1)) < 1.1e-4
    assert np.all(np.isfinite(y)) and np.all((y[~near] >= 0) & (y[~near] < 2.0 ** -124))


def test_a_share_of_more_than_8_pairs_is_refused():
    with pytest.raises(ValueError, match="share is how many of every 8 column pairs go to the FMA units, 0 to 8, not 9"):
        hopper_softmax(9)


@pytest.mark.parametrize("causal", [False, True])
def test_the_work_items_cover_each_head_and_row_block_once(causal):
    heads, row_blocks, seq = 3, 8, 8 * walk.BR_H
    items = [walk.work_item(w, row_blocks, seq, causal) for w in range(heads * row_blocks)]
    assert sorted((bh, bx) for bh, bx, _ in items) == [(h, b) for h in range(heads) for b in range(row_blocks)]
    assert all(tiles == (bx + 1 if causal else seq // walk.BC_H) for _, bx, tiles in items)
    if causal:  # within a head, the longest rows first
        assert [bx for bh, bx, _ in items[:row_blocks]] == list(range(row_blocks - 1, -1, -1))


def test_the_grouped_walk_is_the_numpy_order_and_balances_the_blocks(nb11_order):
    """in_groups walks the items as the notebook's causal_order (NumPy) lists them, each once with its
    tiles to the diagonal; and it is the point of the step: on 132 blocks, 32k tokens a batch, the
    busiest block has far more than the mean's tiles head by head, and within 4% of it in groups."""
    causal_order, busiest_block = nb11_order
    heads, row_blocks, group = 12, 8, 4
    items = [walk.in_groups(heads, group)(w, row_blocks, row_blocks * walk.BR_H, True) for w in range(heads * row_blocks)]
    assert [(h, b) for h, b, _ in items] == list(zip(*(a.tolist() for a in causal_order(heads, row_blocks, group))))
    assert all(tiles == b + 1 for _, b, tiles in items)
    by_head, grouped = (busiest_block(causal_order(1024, 4, g), 132) for g in (1, 16))
    assert by_head > 1.5 and grouped < 1.04


def test_a_group_that_does_not_divide_the_heads_is_refused():
    with pytest.raises(ValueError, match="12 heads are not a whole number of groups of 8"):
        walk.in_groups(12, 8)


@pytest.mark.parametrize("consume", ["consume", "consume_overlapped"])
def test_causal_kernels_stop_at_the_diagonal(nb11, consume):
    """The causal kernel's tile loops run to the diagonal (bounds that depend on the block), the full
    one's over the whole sequence; the mask's compare appears only in the causal kernel."""
    full, causal = (cuda(nb11.hopper_flash_attention(16, 1024, 64, c, getattr(nb11, consume))) for c in (False, True))
    assert "-3.402823e+38" in causal and "-3.402823e+38" not in full  # T.min_value("float32"): the mask
    assert "blockIdx.x" in causal.split("for (int j", 1)[1].split(";", 2)[1]
    assert "blockIdx.x" not in full.split("for (int j", 1)[1].split(";", 2)[1]


def test_the_diffs_the_notebook_prints_are_small(nb11):
    """Each step of sections 3 and 4 is shown as its diff against the step before: a few dozen lines,
    no more, since the later steps call the earlier ones' macros (first_tile, the tile's) as they are."""
    pairs = [(nb11.consume, steps.consume_overlap), (steps.consume_overlap, steps.consume_peeled),
             ([steps.peeled_tile, steps.consume_peeled], [nb11.overlapped_tile, nb11.consume_overlapped]),
             ([nb11.produce, nb11.overlapped_tile], [walk.produce, walk.next_item_tile]),
             (nb11.consume_overlapped, walk.consume_overlapped)]
    for before, after in pairs:
        diff = helpers.source_diff(before, after, lines=10**6)
        changed = [line for line in diff.splitlines() if line.startswith(("+ ", "- "))]
        assert 0 < len(changed) <= 40, diff
    assert walk.first_tile is steps.first_tile is nb11.first_tile and walk.overlapped_tile is nb11.overlapped_tile


def test_the_persistent_consumers_hand_the_turn_on_across_items():
    """Consumer 1's arrival that opens consumer 0's first turn, and consumer 0's wait for consumer 1's
    last, happen once each, outside the walk: inside it the two alternate from item to item."""
    src = cuda(walk.persistent_flash_attention(512, 1024, 128, False, 132))
    consumers = src.split("setmaxnreg_inc_sync_aligned_u32_232();", 1)[1]
    before, walk_loop = consumers.split("for (int turn", 1)
    assert before.count("bar_arrive_arrive((uint)8,") == 1 and "bar_arrive_arrive((uint)8," not in walk_loop
    assert walk_loop.count("bar_sync_count_sync((uint)8,") == 1
    last = walk_loop.split("bar_sync_count_sync((uint)8,", 1)[1]
    assert "wgmma" not in last and "mbarrier" not in last  # after the walk's last product


@pytest.mark.parametrize("causal, turns", [(False, ["S + PV", "S + PV", "PV"]), (True, ["S + PV"] * 3 + ["PV"])])
def test_each_item_s_last_product_goes_out_with_the_next_item_s_first_s(causal, turns):
    """A consumer's turns at the tensor cores (from its named-barrier wait to its arrival for the other)
    in the CUDA: the tile loop's S with P V (causal, the diagonal tile's too), then, while items follow,
    the item's last P V with the next item's first S (`next_item_tile`); only the walk's last item ends
    with its last P V alone. Before, every item's last P V went alone and its next S after the store."""
    src = cuda(walk.persistent_flash_attention(512, 1024, 128, causal, 132))
    consumers = src.split("setmaxnreg_inc_sync_aligned_u32_232();", 1)[1]
    found = []
    for turn in consumers.split("bar_sync_count_sync(((uint)((warp_id_in_cta")[1:]:
        turn = turn.split("bar_arrive_arrive(", 1)[0]
        found.append(" + ".join(name for name, op in (("S", "_ss_mma_"), ("PV", "_rs_mma_")) if op in turn))
    assert found == turns


def test_the_persistent_kernel_sets_up_each_mbarrier_of_its_array_once():
    """Two Q buffers bring a "full" and an "empty" mbarrier each: the kernel sets up every barrier of its
    array once, the producer's ("full", one arrival) before the consumers' ("empty", two), and none past
    its end (with one Q buffer the kernel once set up an "empty" barrier more than its array held)."""
    import re

    for dim in (64, 128):
        src = cuda(walk.persistent_flash_attention(512, 1024, dim, False, 132))
        inits = re.findall(r"mbarrier_init_init_shared_b64\(.*?pool_ptr\)\[(\d+)\]\)\)\), \(uint\)(\d)\)", src)
        at = (walk.Q_BUFS * walk.BR_H + 2 * walk.STAGES * walk.BC_H) * dim * 2 // 8
        assert [int(i) for i, _ in inits] == list(range(at, at + walk.BARS)), inits
        assert [int(n) for _, n in inits] == [1] * walk.Q_EMPTY + [2] * (walk.BARS - walk.Q_EMPTY)
    assert walk.Q_BUFS == 2 and walk.BARS == 4 + 4 * walk.STAGES


@pytest.mark.parametrize("call, message", [
    (lambda m: m.hopper_flash_attention(16, 4160, 64),
     "sequence length 4160 is not a multiple of the 128-token tiles: pad it to 4224 and mask the padded keys"),
    (lambda m: m.hopper_flash_attention(16, 4096, 256), "head dimension 256 is not supported"),
])
def test_shapes_the_tiles_do_not_take_are_refused(nb11, call, message):
    with pytest.raises(ValueError, match=message):
        call(nb11)


# ------------------------------------------------------------------ the exercises

WALK_SOLUTION = solution(NB, "**Write the walk.**")


def test_the_walk_solution_passes_and_builds_the_recorded_kernel(nb11_order):
    namespace = {}
    exec(WALK_SOLUTION, namespace)
    order = namespace["grouped_walk"]
    assert attention_sweep.check_walk(order, nb11_order[0]).startswith("correct")
    mine = cuda(walk.persistent_flash_attention(32, 1024, 128, True, 132, attention_sweep.walk_item(order, 16)))
    assert mine == cuda(walk.persistent_flash_attention(32, 1024, 128, True, 132, walk.in_groups(32, 16)))


@pytest.mark.parametrize("answer, hint", [
    ("def grouped_walk(w, row_blocks, group):\n    return w // row_blocks, row_blocks - 1 - w % row_blocks",
     "every head's longest row block first"),
    ("def grouped_walk(w, row_blocks, group):\n    return w % 6, row_blocks - 1 - w // 6", "group by group"),
    ("def grouped_walk(w, row_blocks, group):\n    return w % group, row_blocks - 1 - w // group % row_blocks",
     "exactly once"),
    ("def grouped_walk(w, row_blocks, group):\n    return w // (group * row_blocks) * group + w % group, w % (group * row_blocks) // group",
     "every head's longest row block first"),
    ("def grouped_walk(w, row_blocks, group):\n    head = ...\n    row_block = ...\n    return head, row_block",
     "not attempted yet"),
])
def test_the_walk_exercise_refuses_wrong_orders(tmp_path, capsys, answer, hint):
    out = run_exercise(tmp_path, capsys, NB, CONTEXT, WALK, answer)
    assert hint in out and not out.startswith("correct"), out


def test_the_walk_exercise_with_its_solution(tmp_path, capsys):
    out = run_exercise(tmp_path, capsys, NB, CONTEXT, WALK, WALK_SOLUTION)
    assert out.startswith("correct: 24 items, in groups of 3 heads"), out


# ------------------------------------------------------------------ on a Hopper GPU: every step against NumPy

def _hopper() -> bool:
    return helpers.gpu_available() and helpers.local_gpu_spec().compute_capability == "9.0"


@pytest.mark.skipif(not _hopper(), reason="the kernels run on a Hopper GPU (sm_90a)")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("step", ["plain", "overlap", "peeled", "ping-pong", "persistent", "a block per item",
                                  "in groups", "Hopper softmax", "the walk's solution"])
def test_every_step_matches_attention_in_float32(nb11, step, causal):
    import tvm
    from helpers.attention import qkv, reference
    b, h, n, d = 2, 4, 1024, 128
    if step in ("in groups", "the walk's solution") and not causal:
        pytest.skip("a causal walk: each item's tiles end at the diagonal")
    if step == "the walk's solution":
        namespace = {}
        exec(WALK_SOLUTION, namespace)
        kernel = walk.persistent_flash_attention(b * h, n, d, causal, 6, attention_sweep.walk_item(namespace["grouped_walk"], 4))
    else:
        kernel = steps_of(nb11)[step](b * h, n, d, causal)
    ex = helpers.build(kernel, "sm_90a", tir_pipeline="tirx")
    q, k, v = qkv(b, h, n, d, True)
    dev = tvm.cuda(0)
    args = [tvm.runtime.tensor(x, dev) for x in (q, k, v, np.zeros_like(q))]
    ex.mod["main"](*args)
    out, expected = args[3].numpy().astype("float32"), reference(q, k, v, causal)
    assert np.linalg.norm(out - expected) / np.linalg.norm(expected) < 2e-3
