"""Notebook 11's plumbing: the sweep of its best kernel against cuDNN over sequence lengths, head
dims and masks, the table of that sweep, and a decoder block timed with torch's attention and with
the TVM kernel. None of it is the lesson (the kernels are in the notebook and in
helpers.flash_hopper_steps / flash_hopper_persistent); it is here so that the lecture shows the
kernel and the numbers, not the loops that gather them."""

from __future__ import annotations

import numpy as np

from helpers.attention import attention_case, attention_flops, qkv, sdpa

SEQS = [512, 1024, 2048, 4096, 8192, 16384]  # the sweep's sequence lengths, 32k tokens per batch
HEADS = 16


def sweep_shapes(nb, make, on_hopper: dict) -> dict:
    """For each head dim and mask, `make(bh, n, d, causal)` and cuDNN at each length of SEQS, timed in
    alternating rounds: name -> measurements (cuDNN's as timed in our kernel's rounds)."""
    sweep = {}
    for d in (64, 128):
        for causal in (False, True):
            mask = " causal" if causal else ""
            for who in ("wgmma", "cuDNN"):
                sweep[f"{who}, d={d}{mask}"] = []
            for n in SEQS:
                shape = (32768 // n, HEADS, n, d)
                name = "x".join(map(str, shape)) + mask
                q, k, v = qkv(*shape, nb.live)
                base = nb.torch_op(f"torch sdpa cuDNN {name}", sdpa("CUDNN_ATTENTION", *shape[:2], causal), [q, k, v],
                                   flops=attention_flops(*shape, causal), quiet=True)
                ours = nb.measure(f"wgmma {name}", make(shape[0] * HEADS, n, d, causal), **on_hopper,
                                  **attention_case(*shape, causal, inputs=[q, k, v]), baseline=base, quiet=True)
                sweep[f"wgmma, d={d}{mask}"].append(ours)
                sweep[f"cuDNN, d={d}{mask}"].append(ours.baseline_in_rounds(base) if ours.ok and base.ok else base)
    return sweep


def sweep_table(sweep: dict) -> list[tuple]:
    """Rows of TFLOP/s (and the median ratio to cuDNN over interleaved rounds, with its quartiles) per
    length and case."""
    rows = [("sequence", *[f"d={d}{' causal' if c else ''}" for d in (64, 128) for c in (False, True)])]
    for i, n in enumerate(SEQS):
        cells = []
        for d in (64, 128):
            for mask in ("", " causal"):
                m = sweep[f"wgmma, d={d}{mask}"][i]
                cells.append(f"{m.tflops:.0f} ({m.ratio_text('x')})" if m.ok and m.ratio else "-")
        rows.append((n, *cells))
    return rows


def tvm_sdpa(ex, device):
    """F.scaled_dot_product_attention(q, k, v, is_causal=...) for (batch, heads, seq, dim) fp16 CUDA
    tensors, on a TVM kernel, launched on torch's stream; the tensors pass by DLPack, as views."""
    import torch
    import tvm_ffi

    def attention(q, k, v):
        o = torch.empty_like(q)
        with tvm_ffi.use_raw_stream(device, torch.cuda.current_stream().cuda_stream):
            ex.mod["main"](*(t.view(-1, *t.shape[2:]) for t in (q, k, v, o)))  # views: the same memory
        return o
    return attention


def decoder_block(width, heads):
    """One pre-norm decoder block (layer norm, QKV projection, attention, output projection, MLP) in
    fp16, as a function of its input and of the attention to use."""
    import torch
    torch.manual_seed(0)
    nn = torch.nn
    layers = nn.ModuleDict(dict(ln1=nn.LayerNorm(width), qkv=nn.Linear(width, 3 * width), out=nn.Linear(width, width),
                                ln2=nn.LayerNorm(width), mlp=nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                                                           nn.Linear(4 * width, width))))
    layers = layers.half().cuda()

    def forward(x, attention):
        b, n, _ = x.shape
        qkv_ = layers.qkv(layers.ln1(x)).view(b, n, 3, heads, width // heads).permute(2, 0, 3, 1, 4).contiguous()
        x = x + layers.out(attention(qkv_[0], qkv_[1], qkv_[2]).transpose(1, 2).reshape(b, n, width))
        return x + layers.mlp(layers.ln2(x))
    return forward


def decoder_block_flops(width: int, tokens: int, seq: int, causal: bool = True) -> tuple[float, float]:
    """(FLOP of the block's matmuls, FLOP of its attention) for `tokens` tokens in sequences of `seq`:
    QKV 3w², output w², MLP 8w² multiply-adds per token; attention 4·N·d per token and head (half causal)."""
    matmuls = 2 * tokens * 12 * width * width
    attention = 4 * tokens * seq * width * (0.5 if causal else 1)
    return matmuls, attention


def time_block(nb, ex, label: str, batch: int, seq: int, heads: int, dim: int, live: bool):
    """The decoder block with torch's default attention and with the kernel `ex`, checked, timed in
    alternating rounds (median of each), and the backend torch's default picked; else the records."""
    if not live:
        return (*(nb.recorded_or_live(f"{label}, {who}") for who in ("torch's attention", "wgmma kernel")), None)
    import torch
    from helpers import baselines
    block = decoder_block(heads * dim, heads)
    x = torch.randn(batch, seq, heads * dim, device="cuda", dtype=torch.float16)
    sdpa_causal = lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
    with torch.no_grad():
        reference_out = block(x, sdpa_causal)
        err = float((block(x, tvm_sdpa(ex, nb.device)) - reference_out).norm() / reference_out.norm())
        rounds = [baselines.event_rounds(lambda f=f: block(x, f), torch.cuda.Event, torch.cuda.synchronize)
                  for f in (tvm_sdpa(ex, nb.device), sdpa_causal)]
        ours_ms, torch_ms, ratio = baselines.interleaved(*rounds, 10)
    with_torch = nb.record(f"{label}, torch's attention", float(np.median(torch_ms)))
    with_ours = nb.record(f"{label}, wgmma kernel", float(np.median(ours_ms)), rel_err=err, ratio=ratio,
                          ratio_quartiles=baselines.ratio_quartiles(ours_ms, torch_ms), versus=with_torch.name)
    return with_torch, with_ours, default_backend(batch, heads, seq, dim)


def default_backend(batch, heads, seq, dim) -> str:
    """The backend torch's default scaled_dot_product_attention picks for these fp16 CUDA shapes,
    causal, as torch's own dispatcher answers (a private function: "unknown" if it is gone)."""
    import torch
    from torch.nn.attention import SDPBackend
    q = torch.randn(batch, heads, seq, dim, device="cuda", dtype=torch.float16)
    try:
        return SDPBackend(torch._fused_sdp_choice(q, q, q, is_causal=True)).name
    except Exception:  # noqa: BLE001
        return "unknown"


def walk_item(order, group):
    """The persistent kernel's `work_item` from a causal walk `order(w, row_blocks, group) -> (head,
    row block)`: the item's tiles of K and V run to the diagonal, row block + 1."""
    def work_item(w, row_blocks, seq, causal):
        head, row_block = order(w, row_blocks, group)
        return head, row_block, row_block + 1
    return work_item


def check_walk(order, reference, heads: int = 6, row_blocks: int = 4, group: int = 3) -> str:
    """Notebook 11's exercise: whether `order(w, row_blocks, group)` walks the causal items of `heads`
    heads as `reference(heads, row_blocks, group)` (NumPy: the heads and the row blocks in turn) does.
    A hint where not."""
    items = [order(w, row_blocks, group) for w in range(heads * row_blocks)]
    if any(x is Ellipsis for item in items for x in item):
        return "Exercise: not attempted yet (fill in head and row_block)"
    items = [(int(h), int(b)) for h, b in items]
    if items == list(zip(*(a.tolist() for a in reference(heads, row_blocks, group)))):
        return f"correct: {heads * row_blocks} items, in groups of {group} heads, the longest row blocks first"
    if sorted(items) != [(h, b) for h in range(heads) for b in range(row_blocks)]:
        return "every (head, row block) must come exactly once: some come twice or not at all"
    if [h // group for h, _ in items] != sorted(h // group for h, _ in items):
        return f"take the heads group by group: all items of heads 0-{group - 1}, then of heads {group}-{2 * group - 1}, ..."
    if [b for _, b in items[:group]] != [row_blocks - 1] * group:
        return "in a group, every head's longest row block first (row block b has b + 1 tiles), then the next"
    return "in a group, the heads of one row block in order: head g·group, g·group + 1, ..."
