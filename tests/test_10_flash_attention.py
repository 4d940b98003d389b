"""Notebook 10 (FlashAttention) on the CPU: its three-kernel attention run on LLVM against float64
NumPy; the instructions each fused kernel is written with, as the generated CUDA shows them
(mma.sync and ldmatrix for sm_80, cp.async only in the pipelined step); the causal kernel stopping at
the diagonal; the clear errors for a head
dimension or a sequence the tiles do not take; and the exercise with its solution and wrong answers."""


import numpy as np
import pytest
import tvm

import helpers
from test_exercises import run_exercise, solution

NB = "10_flash_attention"
EXERCISE = "smem_per_block = ..."
SOLUTION = solution(NB, "## 6. Exercise")


@pytest.fixture(scope="module")
def nb10():
    """The notebook's kernels, macros and helpers (its exported cells)."""
    return helpers.lessons.lesson(NB)


def attention64(q, k, v, causal=False):
    """Attention in float64: softmax(q k^T / sqrt(d)) v, per head."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.triu(np.ones(s.shape[-2:], bool), 1), -np.inf, s)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def cuda(kernel, arch):
    return helpers.build(kernel, arch, tir_pipeline="tirx").mod.imports[0].inspect_source()


def test_the_flop_count_is_the_papers(nb10):
    assert nb10.attention_flops(2, 3, 64, 16) == 4 * 2 * 3 * 64 * 64 * 16
    assert nb10.attention_flops(2, 3, 64, 16, causal=True) == 2 * 2 * 3 * 64 * 64 * 16


def test_the_three_kernels_compute_attention(nb10):
    """The naive version's three PrimFuncs, unscheduled on LLVM, chained as the notebook chains them
    on the GPU: S in fp16, its softmax in fp32, then P V; large logits included."""
    g = np.random.default_rng(0)
    q, k, v = (g.standard_normal((2, 32, 16)).astype("float16") for _ in range(3))
    q[0, :2] *= 20  # logits near 100: exp would overflow without the row maximum
    s_mod, p_mod, o_mod = (tvm.compile(m, target="llvm") for m in nb10.naive_attention(2, 32, 16))
    t = [tvm.runtime.tensor(x) for x in (q, k, v)]
    s, p, o = (tvm.runtime.tensor(np.empty(shape, "float16")) for shape in [(2, 32, 32), (2, 32, 32), (2, 32, 16)])
    s_mod["main"](t[0], t[1], s)
    p_mod["main"](s, p)
    o_mod["main"](p, t[2], o)
    assert np.isfinite(o.numpy()).all()
    expected = attention64(q, k, v)
    assert np.abs(o.numpy() - expected).max() / np.abs(expected).max() < 1e-2


@pytest.mark.parametrize("d", [64, 128])
def test_the_portable_kernels_are_mma_sync_code(nb10, d):
    sync, pipelined = (cuda(f(32, 1024, d), "sm_80") for f in (nb10.flash_attention, nb10.flash_attention_pipelined))
    for src in (sync, pipelined):
        assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in src
        assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in src  # Q and K
        assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in src  # V, transposed on the way
        assert "cvt.rn.f16x2.f32" in src  # P packed for the second product
        assert "exp2f" in src and "__shfl_xor_sync" in src  # the online softmax and its row merge
    assert "cp.async" not in sync
    assert "cp.async.cg.shared.global" in pipelined and "cp.async.wait_group 1" in pipelined


def test_the_causal_kernel_stops_at_the_diagonal(nb10):
    """The causal loop's trip count depends on the block (tiles up to the diagonal); the full one's is
    the sequence's. The mask's compare appears only in the causal kernel."""
    full, causal = (cuda(nb10.flash_attention_pipelined(16, 1024, 64, c), "sm_80") for c in (False, True))
    assert "blockIdx.x" in causal.split("for (int j", 1)[1].split(";", 2)[1]
    assert "blockIdx.x" not in full.split("for (int j", 1)[1].split(";", 2)[1]
    assert "-3.402823e+38" in causal and "-3.402823e+38" not in full  # T.min_value("float32"): the mask


@pytest.mark.parametrize("call, message", [
    (lambda m: m.flash_attention(16, 4096, 96), "head dimension 96 is not supported: the kernels take 64 or 128"),
    (lambda m: m.flash_attention_pipelined(16, 1000, 128),
     "sequence length 1000 is not a multiple of the 64-token tiles: pad it to 1024 and mask the padded keys"),
])
def test_shapes_the_tiles_do_not_take_are_refused(nb10, call, message):
    with pytest.raises(ValueError, match=message):
        call(nb10)


def test_the_exercise_with_its_solution(tmp_path, capsys):
    out = run_exercise(tmp_path, capsys, NB, ["helpers.start("], EXERCISE, SOLUTION, extra="BC = 64")
    assert out.startswith("correct: 80 KiB per block, 2 blocks per SM"), out


@pytest.mark.parametrize("answer, hint", [
    ("smem_per_block = (64 + 2 * 64) * 128 * 2\nblocks_per_sm = 4", "2 stages of K and of V"),
    ("smem_per_block = (64 + 4 * 64) * 128 * 2\nblocks_per_sm = 3", "rounding down"),
    ("smem_per_block = ...\nblocks_per_sm = ...", "Exercise: not attempted yet"),
])
def test_the_exercise_rejects_wrong_answers(tmp_path, capsys, answer, hint):
    out = run_exercise(tmp_path, capsys, NB, ["helpers.start("], EXERCISE, answer, extra="BC = 64")
    assert hint in out and not out.startswith("correct"), out
