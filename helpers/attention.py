"""Plumbing shared by the attention lessons (notebooks 10 and 11): the FLOP count, the shapes the
kernels take, the inputs, a float32 reference and PyTorch's own attention as a baseline. The
kernels are the lessons, so they stay in the notebooks."""

from __future__ import annotations

import numbers

import numpy as np

from .kernels import check_number


def _check_sizes(**sizes) -> None:
    """Refuse a batch, head count, sequence length or head dimension that is not a positive integer."""
    for name, size in sizes.items():
        check_number(name, size)


def attention_flops(b: int, h: int, n: int, d: int, causal: bool = False) -> float:
    """A forward pass's FLOP as FlashAttention's papers count them: two products of 2·n²·d per head,
    half of it when causal."""
    _check_sizes(b=b, h=h, n=n, d=d)
    return 4.0 * b * h * n * n * d / (2 if causal else 1)


def check_shape(n: int, d: int, rows: int) -> None:
    """A clear error for a shape the kernels do not take: head dims 64 and 128, whole tiles of `rows`."""
    check_number("the sequence length n", n)
    check_number("the tile's rows", rows)
    if isinstance(d, bool) or not isinstance(d, numbers.Integral):  # 64.0 is no buffer dimension
        raise ValueError(f"head dimension {d!r} is not supported: the kernels take 64 or 128")
    if d not in (64, 128):
        raise ValueError(f"head dimension {d} is not supported: the kernels take 64 or 128")
    if n % rows:
        raise ValueError(f"sequence length {n} is not a multiple of the {rows}-token tiles: pad it to "
                         f"{-(-n // rows) * rows} and mask the padded keys")


def qkv(b: int, h: int, n: int, d: int, live: bool) -> list[np.ndarray]:
    """(b*h, n, d) fp16 inputs, seeded. A few queries are scaled 40-fold, so that their logits reach
    the hundreds and a softmax without the running maximum would overflow. Not live (no GPU to run
    on): uninitialized arrays of the right shape, for builds and records only."""
    _check_sizes(b=b, h=h, n=n, d=d)
    if not live:
        try:
            return [np.empty((b * h, n, d), "float16") for _ in range(3)]
        except (MemoryError, ValueError):  # NumPy's own words ("array is too big") name no size
            raise ValueError(f"q, k and v of shape (b*h, n, d) = ({b * h}, {n}, {d}) in float16 need "
                             f"{6 * b * h * n * d / 2**30:,.0f} GiB: more than this machine can hold") from None
    g = np.random.default_rng(0)
    q, k, v = (g.standard_normal((b * h, n, d), dtype=np.float32).astype("float16") for _ in range(3))
    q[0, :4] *= 40
    return [q, k, v]


def attention_case(b: int, h: int, n: int, d: int, causal: bool = False, *, live: bool = True,
                   inputs: list[np.ndarray] | None = None) -> dict:
    """What `Session.measure` needs to check and time an attention kernel on (b*h, n, d) fp16 inputs
    (`inputs`, else `qkv`'s): Q, K, V and O, the float32 reference (computed only where the kernel
    runs), the FLOP of the forward pass, and the bytes of Q, K, V and O each moved once."""
    q, k, v = inputs if inputs is not None else qkv(b, h, n, d, live)
    if q.shape != (b * h, n, d):
        raise ValueError(f"q has shape {q.shape}, not (b*h, n, d) = ({b * h}, {n}, {d})")
    return dict(args=[q, k, v, np.empty_like(q)], expected=lambda: reference(q, k, v, causal),
                flops=attention_flops(b, h, n, d, causal), bytes=8.0 * b * h * n * d, tol=2e-3)


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = False) -> np.ndarray:
    """Attention in float32 by torch's math backend on the GPU, a few heads at a time (S is n x n
    floats per head)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out, heads = [], max(1, 2**28 // q.shape[1] ** 2)
    with sdpa_kernel(SDPBackend.MATH):
        for i in range(0, len(q), heads):
            t = [torch.from_numpy(x[i:i + heads]).cuda().float() for x in (q, k, v)]
            out.append(torch.nn.functional.scaled_dot_product_attention(*t, is_causal=causal).cpu().numpy())
    return np.concatenate(out)


def sdpa(backend: str, b: int, h: int, causal: bool = False):
    """torch's scaled_dot_product_attention forced onto one backend ("FLASH_ATTENTION",
    "CUDNN_ATTENTION", "EFFICIENT_ATTENTION"), as a `Session.torch_op` callable on (b*h, n, d) tensors."""
    def call(torch, q, k, v):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel(getattr(SDPBackend, backend)):
            return torch.nn.functional.scaled_dot_product_attention(
                *(x.view(b, h, *x.shape[1:]) for x in (q, k, v)), is_causal=causal)
    return call
