"""Plumbing shared by the matmul lessons that run on one architecture (notebooks 07 and 08): the
inputs, the float64 reference and the counts `Session.measure` needs. The kernels are the lessons, so
they stay in the notebooks."""

from __future__ import annotations

import functools

import numpy as np

from .kernels import check_matmul


def matmul_case(M: int, N: int, K: int, dtype: str = "float16", out_dtype: str = "float32", *,
                tol: float = 1e-3) -> dict:
    """What `Session.measure` needs to check and time C = A B (A: M x K, B: K x N, seeded, uniform in
    [-1, 1]): the arrays (C in `out_dtype`), the float64 reference (computed once, and only where a
    kernel runs), the FLOP and the bytes of A and B read once and C written once."""
    check_matmul(M, N, K, dtype=dtype, out_dtype=out_dtype)
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (M, K)).astype(dtype)
    b = rng.uniform(-1, 1, (K, N)).astype(dtype)
    c = np.zeros((M, N), out_dtype)
    reference = functools.cache(lambda: a.astype("float64") @ b.astype("float64"))
    return dict(args=[a, b, c], expected=reference, flops=2.0 * M * N * K, tol=tol,
                bytes=float(a.nbytes + b.nbytes + c.nbytes))
