"""Plumbing for notebook 10's steps (FlashAttention on mma.sync): PyTorch's three attention
backends as baselines, the three-kernel version run in a chain, what the first two kernel steps
write (a value per row) and their float32 reference, a diff of two kernels' sources, the check of
the exercise's mask, and TVM's prefill kernel measured and read. The kernels themselves are the
lesson, so they stay in the notebook."""

from __future__ import annotations

import re

import numpy as np

from . import bench, env, kernels
from .attention import attention_flops, reference, sdpa

LOG2E = 1.4426950408889634


def torch_backends(nb, b: int, h: int, n: int, d: int, inputs) -> tuple:
    """torch's flash, cuDNN and memory-efficient attention on `inputs` (q, k, v of shape
    (b*h, n, d)), then flash again with the causal mask: each a baseline that later kernels are
    timed against in alternating rounds."""
    shape, flops = f"{b}x{h}x{n}x{d}", attention_flops(b, h, n, d)
    found = [nb.torch_op(f"torch sdpa {name} {shape}", sdpa(backend, b, h), list(inputs), flops=flops)
             for name, backend in [("flash", "FLASH_ATTENTION"), ("cuDNN", "CUDNN_ATTENTION"),
                                   ("memory-efficient", "EFFICIENT_ATTENTION")]]
    return (*found, nb.torch_op(f"torch sdpa flash {shape} causal", sdpa("FLASH_ATTENTION", b, h, causal=True),
                                list(inputs), flops=attention_flops(b, h, n, d, causal=True)))


def run_chained(nb, name: str, executables, inputs):
    """The three kernels of naive attention (S = QK^T, P = softmax(S), O = PV) run in turn on the GPU
    through two (bh, n, n) fp16 buffers, checked against float32 attention; their times add up. The
    bytes: Q, K, V and O once, S and P each written and read. Without a GPU: the recorded result (or a
    missing one). Printed, as `Session.measure` prints."""
    q, k, v = inputs
    bh, n, d = q.shape
    if not nb.live:
        m = nb.recorded_or_live(name) or bench.Measurement(name, None, source="missing")
        print(m)
        return m
    import tvm
    dev = env.device()
    s, p = (tvm.runtime.tensor(np.empty((bh, n, n), "float16"), dev) for _ in range(2))
    o = tvm.runtime.tensor(np.empty((bh, n, d), "float16"), dev)
    q_, k_, v_ = (tvm.runtime.tensor(x, dev) for x in (q, k, v))
    args = [[q_, k_, s], [s, p], [p, v_, o]]
    for ex, a in zip(executables, args):
        ex.mod["main"](*a)
    err = bench.relative_error(o.numpy(), reference(q, k, v))
    ms = sum(np.median(bench.time_function(ex.mod, dev, a)) for ex, a in zip(executables, args))
    m = nb.record(name, ms, rel_err=err, flops=4.0 * bh * n * n * d, bytes=2.0 * (4 * bh * n * d + 4 * bh * n * n))
    print(m)
    return m


def attention_roofline(nb, points):
    """The measured kernels (those with a result) on this GPU's roofline, or a line saying there is none."""
    from .plots import roofline
    points = [m for m in points if m is not None and m.ok]
    if nb.spec is not None and nb.spec.dram_gbps and points:
        return roofline(nb.spec, points, title="Attention on the roofline, fp16")
    print("no recorded results for this GPU to place on a roofline")
    return None


def row_statistics_case(q: np.ndarray, k: np.ndarray, what: str) -> dict:
    """What `Session.measure` needs for the first two kernel steps, which write one float per query
    row: `what` = "max" (the row maximum of S = QK^T / sqrt(d)) or "logsumexp" (log of the row's sum
    of exp(S)). The reference is float32 S by torch on the GPU, computed only where the kernel runs;
    the FLOP are those of the one product, the bytes Q and K read once and a float per row written."""
    if what not in ("max", "logsumexp"):
        raise ValueError(f"what is 'max' or 'logsumexp', not {what!r}")
    bh, n, d = q.shape

    def expected():
        import torch
        out, heads = [], max(1, 2**28 // n ** 2)
        for i in range(0, bh, heads):
            qt, kt = (torch.from_numpy(x[i:i + heads]).cuda().float() for x in (q, k))
            s = qt @ kt.transpose(1, 2) / d ** 0.5
            out.append((s.amax(-1) if what == "max" else torch.logsumexp(s, -1)).cpu().numpy())
        return np.concatenate(out)

    return dict(args=[q, k, np.empty((bh, n), "float32")], expected=expected, flops=2.0 * bh * n * n * d,
                bytes=4.0 * bh * n * d + 4.0 * bh * n, tol=1e-4)


def padded_key_table(key0: int, n_valid: int, cols: int = 64) -> np.ndarray:
    """Which of its `cols // 2` accumulators each of the 32 lanes must mask (True) in a tile of S whose
    first key is `key0`, where keys from `n_valid` on are padding: in the m16n8 layout, s[i*4 + h*2 + e]
    of lane l holds key key0 + 8i + 2(l % 4) + e, for both rows h."""
    i, h, e = np.meshgrid(np.arange(cols // 8), np.arange(2), np.arange(2), indexing="ij")
    index = (i * 4 + h * 2 + e).ravel()
    table = np.zeros((32, cols // 2), bool)
    for lane in range(32):
        table[lane, index] = (key0 + i * 8 + lane % 4 * 2 + e).ravel() >= n_valid
    return table


MASK_CASES = [(0, 37), (64, 100), (128, 129), (0, 64)]  # (key0, n_valid): the first key, the valid keys


def _mask_on_cpu(T, tvm, macro, key0, n_valid, cols):
    @T.prim_func
    def main(out: T.Buffer((32, cols // 2), "float32")):
        for lane in range(32):  # every lane in turn, on the CPU
            s = T.decl_buffer((cols // 2,), "float32", data=out.data, elem_offset=lane * (cols // 2))
            macro(s, key0, n_valid, lane, cols)
    f = tvm.compile(tvm.IRModule({"main": main}), target="llvm")
    out = tvm.runtime.tensor(np.zeros((32, cols // 2), "float32"))
    f["main"](out)
    return out.numpy() < -1e38


def _mask_on_gpu(T, macro, key0, n_valid, cols):
    @T.prim_func
    def main(out: T.Buffer((32, cols // 2), "float32")):
        T.device_entry()
        T.cta_id([1])
        lane = T.thread_id([32])
        s = T.alloc_local((cols // 2,), "float32")
        for i in T.unroll(cols // 2):
            s[i] = T.float32(0)
        macro(s, key0, n_valid, lane, cols)
        for i in T.unroll(cols // 2):
            out[lane, i] = s[i]
    return main


def check_key_mask(macro, nb, cols: int = 64) -> str:
    """The exercise's check of a `mask_padded_keys(s, key0, n_valid, lane, cols)` macro: run for every
    lane on the CPU (LLVM) at a few tiles, the entries it masked compared with `padded_key_table`;
    built into a warp's kernel for sm_80 (the proof it is kernel code); on a GPU run there too."""
    import tvm
    from tvm.script import tirx as T
    try:
        tables = [(_mask_on_cpu(T, tvm, macro, key0, n_valid, cols), padded_key_table(key0, n_valid, cols))
                  for key0, n_valid in MASK_CASES]
    except tvm.error.DiagnosticError:
        return "not yet: mask_padded_keys is no TIRx macro that builds (its error is printed above)"
    if not any(got.any() for got, _ in tables):
        return "Exercise: not attempted yet (fill in the body of mask_padded_keys: it masks nothing)"
    for (key0, n_valid), (got, want) in zip(MASK_CASES, tables):
        if (got != want).any():
            lane, reg = np.argwhere(got != want)[0]
            return (f"not yet: tile from key {key0}, {n_valid} valid keys: lane {lane}'s s[{reg}] should "
                    f"{'' if want[lane, reg] else 'not '}be masked")
    kernel = _mask_on_gpu(T, macro, 64, 100, cols)
    ex = nb.build(kernel, "sm_80", tir_pipeline="tirx")
    if nb.runs("sm_80"):
        out = bench._launch_once(ex, env.device(), [np.zeros((32, cols // 2), "float32")], 0)[0].numpy()
        if ((out < -1e38) != padded_key_table(64, 100, cols)).any():
            return "not yet: on the GPU the masked entries differ from the layout's"
    return "Exercise: right" + (" (checked on the GPU too)" if nb.runs("sm_80") else " (checked on the CPU; built for sm_80)")


def measure_prefill(nb, b: int, h: int, n: int, d: int, inputs, baseline=None):
    """TVM's own prefill-attention kernel (tvm.relax.frontend.nn.llm, a private module that MLC-LLM's
    KV cache uses) on the same inputs, in its (batch, sequence, heads, dim) layout; checked
    against float32 attention, timed in rounds against `baseline`."""
    from tvm import IRModule
    from tvm.relax.frontend.nn.llm import _prefill_kernels

    prefill = _prefill_kernels._attention_sequence_prefill(h, h, d, "float16", nb.target, causal=0, sm_scale=d ** -0.5)
    bnhd = lambda x: np.ascontiguousarray(x.reshape(b, h, n, d).transpose(0, 2, 1, 3))  # noqa: E731
    q, k, v = inputs
    args = [bnhd(x) for x in (q, k, v)] + [np.empty((b, n, h, d), "float16"), np.empty((b, n, h), "float16")]
    return nb.measure(f"TVM prefill kernel (TensorIR) {b}x{h}x{n}x{d}", IRModule({"main": prefill}), args,
                      lambda: bnhd(reference(q, k, v)), flops=attention_flops(b, h, n, d), tol=2e-3, out=3,
                      baseline=baseline, repeat=5)


def prefill_anatomy(target, h: int, d: int) -> str:
    """What TVM's prefill kernel is at fp16 and head dim `d`, read from the configuration it is made
    with and from the CUDA it generates: its tiles and threads, whether any tensor-core instruction
    appears, and how many barriers one tile of keys costs (a barrier inside a loop counted per trip)."""
    from tvm import IRModule
    from tvm.relax.frontend.nn.llm import _kernel_common, _prefill_kernels

    _, vec, _, bdx, warps, tile_q, _, tile_k = _kernel_common._get_prefill_kernel_config(h, h, d, "float16", target)
    prefill = _prefill_kernels._attention_sequence_prefill(h, h, d, "float16", target, causal=0, sm_scale=d ** -0.5)
    cuda = kernels.cuda_source(IRModule({"main": prefill}), target)
    loop = cuda[cuda.index("for (int iterator"):]
    body, depth = [], 0
    for line in loop.splitlines():  # the loop over tiles of keys, up to its closing brace
        depth += line.count("{") - line.count("}")
        body.append(line)
        if depth == 0 and len(body) > 1:
            break
    body = "\n".join(body)
    tensor = sum(cuda.count(w) for w in ("mma", "wmma", "ldmatrix"))
    barriers = body.count("__syncthreads") + sum(  # a barrier inside an inner loop counts each trip
        int(m.group(1)) - 1 for m in re.finditer(r"for \(int \w+ = 0; \w+ < (\d+); \+\+\w+\) \{\n\s*__syncthreads", body))
    return "\n".join([
        f"tiles: {tile_q} queries x {tile_k} keys a block, {bdx * warps} threads ({warps} warps), loads of {vec * 2} bytes",
        f"tensor-core instructions (mma, wmma, ldmatrix) in its CUDA: {tensor}",
        f"barriers (__syncthreads) per tile of {tile_k} keys: {barriers}",
    ])
