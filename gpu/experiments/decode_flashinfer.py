"""FlashInfer's paged decode beside ours: the baseline issue 45 names that 12's sweep still lacks.

FlashInfer's `BatchDecodeWithPagedKVCacheWrapper` reads the layout notebook 12 uses, (pages, 2, KV heads, 16,
d) ("HND"), through a page table in CSR form (indptr, page indices, the last page's length). It compiles its
kernels on first use, which the GPU machine cannot (no nvcc, no registry), so `flashinfer_build.sh` compiles
the one module the wrapper picks here (fp16, d = 128, flashinfer-python 0.7.4, sm_90a) into
`.gpu/flashinfer/batch_decode.so`, and this script calls that module's `plan` and `run` as the wrapper does
(flashinfer/decode.py: the non-tensor-core path, `use_tensor_cores=False`, the wrapper's default; 128 MB
float and 8 MB int workspaces; programmatic dependent launch on sm_90, as `device_support_pdl` turns on).
The plan runs once a shape, on the host, as the wrapper's `plan` does; only `run` is timed.

At each shape: ours (12's staged kernel as section 8 plans it: `plan_one_wave` for 2 blocks an SM), FlashInfer
and SDPA on the same keys (dense), each checked against the float64 reference, then timed as the notebook
times (flushed and held below 4x L2, else back to back) in 9 rounds taking each in turn. Prints the median us
a call and each baseline's time over ours [quartiles of the per-round ratios].

    bash gpu/experiments/flashinfer_build.sh                  (this machine, once: nvcc and PyPI)
    python gpu/experiments/decode_flashinfer.py [BxN ...]     (GPU machine, carrying .gpu/flashinfer;
                                                               N in k; default 12's sweep)
    python gpu/experiments/decode_flashinfer.py check         (no GPU: the module loads, the page table)
"""

import statistics
import sys
from pathlib import Path

import numpy as np

from helpers import baselines, bench, decode
from helpers.decode import PAGE
from helpers.decode_mma import decode_paged_mma_async

SO = Path(__file__).resolve().parents[2] / ".gpu" / "flashinfer" / "batch_decode.so"
HND = 1  # flashinfer.utils.TensorLayout.HND: K and V as (pages, KV heads, page, d)


def csr_pages(table, lengths, page=PAGE):
    """12's page table (a row of page numbers a sequence, and its length) as FlashInfer's: indptr (where each
    sequence's pages start in `indices`), indices (the pages in order), last_page_len (keys in the last page;
    0 for an empty sequence)."""
    lengths = np.asarray(lengths, "int64")
    pages = -(-lengths // page)
    indptr = np.concatenate([[0], np.cumsum(pages)]).astype("int32")
    indices = np.concatenate([table[i, :p] for i, p in enumerate(pages)] + [np.zeros(0, "int32")]).astype("int32")
    last = np.where(pages > 0, lengths - page * (pages - 1), 0).astype("int32")
    return indptr, indices, last


def load_module(so=SO):
    import tvm_ffi

    if not so.exists():
        raise FileNotFoundError(f"{so.relative_to(SO.parents[2])} is missing: build it with "
                                "`bash gpu/experiments/flashinfer_build.sh` where nvcc is, and carry .gpu/flashinfer")
    return tvm_ffi.load_module(str(so))


def flashinfer_decode(module, q, kv, table, lengths):
    """A call running FlashInfer's decode of the torch tensors q (b, HQ, d) and kv (pages, 2, HKV, page, d) over the
    NumPy `table` and `lengths`, planned now; the call returns its output (b, HQ, d)."""
    import torch

    b, hq, d = q.shape
    hkv, page = kv.shape[2], kv.shape[3]
    indptr, indices, last = csr_pages(table, lengths, page)
    float_ws = torch.empty(128 << 20, dtype=torch.uint8, device=q.device)
    int_ws = torch.empty(8 << 20, dtype=torch.uint8, device=q.device)
    pinned = torch.empty(8 << 20, dtype=torch.uint8, pin_memory=True)
    plan = module.plan(float_ws, int_ws, pinned, torch.from_numpy(indptr), b, hq, hkv, page, False, -1, 0.0, d, d,
                       torch.empty(0, dtype=q.dtype), torch.empty(0, dtype=kv.dtype))
    pages = [torch.from_numpy(x).to(q.device) for x in (indptr, indices, last)]
    k, v = kv[:, 0], kv[:, 1]  # views with the same strides, as FlashInfer's decode requires
    out = torch.empty_like(q)
    pdl = torch.cuda.get_device_capability(q.device)[0] >= 9
    # run(float_ws, int_ws, plan, q, k, v, indptr, indices, last_page_len, o, lse, layout, window_left, enable_pdl,
    #     alibi slopes, logits soft cap, sm_scale, rope scale, rope theta)
    args = (float_ws, int_ws, plan, q, k, v, *pages, out, None, HND, -1, pdl, None, 0.0, d ** -0.5, 1.0, 1e4)

    def call():
        module.run(*args)
        return out
    return call


def main(shapes):
    import torch

    from decode_balance import build_planned, cases
    from decode_read import in_turn

    module = load_module()
    walk = cases(shapes)
    lesson, dev, target, spec = next(walk)
    for b, n, q, kv, table, lengths, ref, rounds, sdpa in walk:
        ex, splits = build_planned(lesson, decode_paged_mma_async, 2, b, n, spec, target)
        args = bench._launch_once(ex, dev, [q, kv, table, lengths, *decode.split_outputs(b, splits)], -1)
        ours_err = bench.relative_error(args[-1].numpy(), ref)
        fi = flashinfer_decode(module, torch.from_numpy(q).cuda(), torch.from_numpy(kv).cuda(), table, lengths)
        fi_err = bench.relative_error(fi().float().cpu().numpy(), ref)
        print(f"    ours {splits} splits, error {ours_err:.0e}; FlashInfer error {fi_err:.0e}", flush=True)
        if not (ours_err < 2e-3 and fi_err < 2e-3):
            print("    not timed: an output is wrong")
            continue
        timers = {"ours": rounds(baselines.on_torch_stream(ex.mod["main"], dev, args)), "FlashInfer": rounds(fi),
                  "SDPA": sdpa}
        times = in_turn(timers)
        line = [f"ours {statistics.median(times['ours']) * 1e3:6.1f} us"]
        for name in ("FlashInfer", "SDPA"):  # its time over ours, round by round
            lo, hi = baselines.ratio_quartiles(times["ours"], times[name])
            ratio = statistics.median(t / o for o, t in zip(times["ours"], times[name]))
            line.append(f"{name} {statistics.median(times[name]) * 1e3:6.1f} us ({ratio:.3f} [{lo:.3f}-{hi:.3f}])")
        print("    " + ", ".join(line), flush=True)


def check():
    """No GPU: the page table's conversion on a ragged batch, and that the module loads and has its functions."""
    kv, table, lengths = decode.paged_cache([1, 16, 17, 40], live=False)
    table = np.vstack([np.full((1, table.shape[1]), -1, "int32"), table])  # and an empty sequence first
    indptr, indices, last = csr_pages(table, [0, *lengths])
    assert list(indptr) == [0, 0, 1, 2, 4, 7] and list(last) == [0, 1, 16, 1, 8], (indptr, last)
    assert list(indices) == [*table[1, :1], *table[2, :1], *table[3, :2], *table[4, :3]]
    module = load_module()
    print(f"page table: indptr {indptr.tolist()}, last {last.tolist()}; {SO.name}: plan {module.plan}, run {module.run}")


if __name__ == "__main__":
    from decode_balance import parse

    if sys.argv[1:2] == ["check"]:
        check()
    else:
        main([parse(a) for a in sys.argv[1:]] or decode.sweep_points())
