"""The KV heads of one sequence side by side: 12's staged kernel launched in clusters of 2, 4 or 8 blocks.

`decode_page_window.py` (H100, 1895f39) found what shuffled pages cost at one split: address translation.
Pages shuffled only within 2 MiB windows (one GPU memory page) run 0.4-1.2 points of SDPA faster than pages
shuffled through the whole pool. A page of the pool holds all 8 KV heads' K and V (64 KiB), and 8 blocks read
it, one a KV head. The grid is (sequence, KV head, split), the sequence on blockIdx.x, so those 8 blocks are the
batch size apart in launch order (32 at 32x8k) and land on any SM of any GPC. A thread-block cluster
(`T.cta_id_in_cluster`, notebook 08) of the sequence's KV heads puts them on one GPC at once: if a TLB beyond
the SM's own serves the GPC, they share the translations of their pages. The question is whether they do.

Each variant is checked against the float64 reference and timed in 9 rounds alternating with SDPA on the dense
keys (`decode_mma.main`: SDPA's time over ours [quartiles]).

    python gpu/experiments/decode_cluster.py [BxN ...]     (N in k; default the one-split shapes and two split ones)
    python gpu/experiments/decode_cluster.py build         (no GPU: the cluster's special registers in the CUDA)
"""

import inspect
import sys

import helpers
from helpers import decode, decode_mma, kernels
from helpers.decode import HKV, HQ, D
from lesson_code import edited, module_from_source

SHAPES = [(32, 8192), (32, 1024), (8, 32768), (128, 1024), (1, 8192), (64, 8192)]
GRID = "            b, h, sp = T.cta_id([B, HKV, splits])\n"


def clustered(heads):
    """decode_paged_mma_async launched in clusters of `heads` blocks: one sequence's neighbouring KV heads."""
    if HKV % heads:
        raise ValueError(f"a cluster of {heads} blocks must divide the {HKV} KV heads")
    src = inspect.getsource(decode_mma)
    at = src.index("def decode_paged_mma_async(")  # the staged kernel's grid, not the register kernel's
    cluster = f"            _cx, _cy, _cz = T.cta_id_in_cluster([1, {heads}, 1])\n"
    src = src[:at] + edited(src[at:], {GRID: GRID + cluster}, "decode_paged_mma_async")
    return module_from_source(f"decode_mma_cluster{heads}", src).decode_paged_mma_async


VARIANTS = (("staged", decode_mma.decode_paged_mma_async, 2),
            *((f"clusters of {c} KV heads", clustered(c), 2) for c in (2, 4, 8)))


def build_report():
    """(No GPU.) Each variant at 32x8k: how often its CUDA names %cluster_ctaid, and its registers a thread."""
    b, n = SHAPES[0]
    for name, factory, _ in VARIANTS:
        ex = kernels.build(factory(b, HQ, HKV, D, *decode.pool_size([n] * b), 1, n), "sm_90a", "tirx")
        print(f"{name}: {ex.mod.imports[0].inspect_source().count('%cluster_ctaid')} %cluster_ctaid in the CUDA, "
              f"registers {', '.join(str(r.registers) for r in helpers.ptxas_report(ex, 'sm_90a'))}")


if __name__ == "__main__":
    from decode_balance import parse
    from decode_mma import main

    if sys.argv[1:2] == ["build"]:
        build_report()
    else:
        main([parse(a) for a in sys.argv[1:]] or SHAPES, VARIANTS)
