"""Notebook 10 (FlashAttention): its three-kernel attention run on LLVM against float64 NumPy; the
tiled algorithm in NumPy against the same; the instructions each kernel step is written with, as
the generated CUDA shows them (mma.sync and ldmatrix for sm_80, exp2 from step (b), cp.async only in
the pipelined step); each step a small change of the previous; the causal kernel stopping at the
diagonal; the clear errors for a head dimension or a sequence the tiles do not take; what the
notebook reads from TVM's prefill kernel; the exercise (a mask macro) with its solution and wrong
answers. On a GPU with mma.sync, every kernel step against float64 NumPy at a small shape."""


import numpy as np
import pytest
import tvm

import helpers
from test_exercises import _one, run_exercise, solution

NB = "10_flash_attention"
EXERCISE = "def mask_padded_keys("
SOLUTION = solution(NB, "**Mask the padding.**")
CONTEXT = ["helpers.start("]
ON_A_GPU = pytest.mark.skipif(not helpers.gpu_available() or float(tvm.cuda(0).compute_version) < 8.0,
                              reason="runs the mma.sync kernels: needs a GPU of sm_80 or later")


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
    out = run_exercise(tmp_path, capsys, NB, CONTEXT, EXERCISE, SOLUTION)
    assert out.startswith("Exercise: right"), out


@pytest.mark.parametrize("wrong", [
    SOLUTION.replace(">= n_valid", "> n_valid"),  # keeps the first padded key
    SOLUTION.replace("lane % 4 * 2", "lane // 4 * 2"),  # the row's lane index, not the column's
    SOLUTION.replace("key0 + i * 8", "i * 8"),  # every tile taken as the first
    SOLUTION.replace("s[i * 4 + h * 2 + e]", "s[i * 4 + e]"),  # only row g, twice
])
def test_the_exercise_refuses_wrong_masks(tmp_path, capsys, wrong):
    assert wrong != SOLUTION
    out = run_exercise(tmp_path, capsys, NB, CONTEXT, EXERCISE, wrong)
    assert out.startswith("not yet:"), out


def test_the_exercise_says_when_it_is_not_attempted(tmp_path, capsys):
    cell = _one(NB, EXERCISE)
    out = run_exercise(tmp_path, capsys, NB, CONTEXT, EXERCISE, cell[:cell.index("\n\n")])
    assert out.startswith("Exercise: not attempted yet"), out


def test_the_tiled_numpy_algorithm_is_attention(nb10):
    g = np.random.default_rng(1)
    q, k, v = (g.standard_normal((1, 192, 32)) for _ in range(3))
    q[0, :3] *= 50
    np.testing.assert_allclose(nb10.flash_numpy(q[0], k[0], v[0], br=64, bc=32), attention64(q, k, v)[0], rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("d", [64, 128])
def test_the_steps_are_mma_sync_code(nb10, d):
    """(a) products and the max only; (b) adds the exponentials and the log; neither touches V."""
    a, b = (cuda(nb10.row_statistics(32, 1024, d, per_tile, finish), "sm_80")
            for per_tile, finish in [(nb10.running_max, nb10.store_max), (nb10.online_softmax, nb10.store_lse)])
    for src in (a, b):
        assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in src and "__shfl_xor_sync" in src
        assert ".trans" not in src and "cvt.rn.f16x2.f32" not in src  # no V, no P V yet
    assert "exp2f" not in a and "log2f" not in a
    assert "exp2f" in b and "log2f" in b and "tvm_builtin_cuda_warp_reduce_sum_4" in b


def test_each_step_is_a_small_change(nb10):
    """What the notebook shows as a step's change stays short enough to read (about 30 lines)."""
    for before, after in [(nb10.row_statistics, nb10.flash_attention),
                          (nb10.flash_attention, nb10.flash_attention_pipelined)]:
        changed = [line for line in helpers.source_diff(before, after, lines=10**6).splitlines()
                   if line.startswith(("+ ", "- "))]
        assert 5 < len(changed) <= 30, changed


def test_what_the_notebook_reads_from_tvms_prefill_kernel(nb10):
    text = nb10.prefill_anatomy(tvm.target.Target("nvidia/nvidia-h100"), 16, 128)
    assert "32 queries x 32 keys a block, 128 threads (4 warps)" in text
    assert "tensor-core instructions (mma, wmma, ldmatrix) in its CUDA: 0" in text
    assert "barriers (__syncthreads) per tile of 32 keys: 39" in text


def _run(kernel, args, out=-1):
    ex = helpers.build(kernel, "sm_80", tir_pipeline="tirx")
    return helpers.bench._launch_once(ex, helpers.device(), args, out)[out].numpy()


@ON_A_GPU
@pytest.mark.parametrize("d", [64, 128])
def test_the_steps_on_a_gpu(nb10, d):
    """Steps (a) and (b) against float64 row statistics of S = QK^T / sqrt(d); (c), pipelined and causal
    against float64 attention; large logits included."""
    g = np.random.default_rng(2)
    q, k, v = (g.standard_normal((4, 256, d)).astype("float16") for _ in range(3))
    q[0, :4] *= 40
    s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 2, 1) / np.sqrt(d)
    top = s.max(axis=-1)
    lse = top + np.log(np.exp(s - top[..., None]).sum(axis=-1))
    for (per_tile, finish), want in [((nb10.running_max, nb10.store_max), top), ((nb10.online_softmax, nb10.store_lse), lse)]:
        got = _run(nb10.row_statistics(4, 256, d, per_tile, finish), [q, k, np.empty((4, 256), "float32")])
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
    for kernel, causal in [(nb10.flash_attention, False), (nb10.flash_attention, True),
                           (nb10.flash_attention_pipelined, False), (nb10.flash_attention_pipelined, True)]:
        got = _run(kernel(4, 256, d, causal), [q, k, v, np.empty_like(q)])
        want = attention64(q, k, v, causal)
        assert np.abs(got - want).max() / np.abs(want).max() < 1e-2, (kernel.__name__, causal)
