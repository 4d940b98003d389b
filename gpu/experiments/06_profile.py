"""Where do the fp16 tensor-core kernels of notebook 06 spend their time? (run under Nsight Compute)

Builds notebook 06's WMMA template at notebook 05's tiles (`wmma`), the best mma.sync variant
of 06_mma.py (`mma`) or that of 06_mma16.py's second round (`mma16`), checks it against a float64
reference, and launches it a few times, so that ncu can profile one launch:

    ncu --launch-skip 2 --launch-count 1 --kernel-name matmul_kernel \\
        --section SpeedOfLight --section WarpStateStats --section Occupancy \\
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \\
        python3 gpu/experiments/06_profile.py wmma
    (the same with `mma` or `mma16`)
"""

import sys

import numpy as np
import tvm

import helpers
from fp16_variants import N, fresh_schedule, load_script, wmma_reference, workload


def main(which: str) -> int:
    func = workload()
    mma06 = load_script("06_mma.py")
    if which == "wmma":
        sch = wmma_reference(func)
    elif which == "mma16":
        mma16 = load_script("06_mma16.py")
        sch = mma16.mma16_schedule(fresh_schedule(func), **mma16.tiles(**mma16.BEST))
    else:
        sch = mma06.mma_schedule(fresh_schedule(func), *mma06.VARIANTS["2x4 warps of 64x64, k tile 64"])
    with tvm.transform.PassContext(config={"tirx.use_async_copy": True}):
        ex = helpers.build(sch)
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (N, N)).astype("float16")
    b = rng.uniform(-1, 1, (N, N)).astype("float16")
    dev = helpers.device()
    args = [tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), tvm.runtime.tensor(np.zeros((N, N), "float32"), dev)]
    for _ in range(4):
        ex.mod["main"](*args)
    dev.sync()
    ref = a[:256].astype("float64") @ b.astype("float64")
    print(f"{which}: relative error on the first 256 rows {helpers.relative_error(args[2].numpy()[:256], ref):.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "wmma"))
