"""Does the data a tensor-core kernel multiplies change its time? (notebook 06)

While tuning, MetaSchedule timed the best fp16 template record faster than notebook 06 times it.
The tuner fills the inputs with its own random data; the notebook uses uniform(-1, 1) and the
cuBLAS baseline normal(0, 1). This times the same tuned kernel and cuBLAS (torch) on the same
arrays, for several kinds of input, in one process.

    python3 gpu/experiments/06_input_data.py
"""

import numpy as np
import torch
import tvm

import helpers
from helpers import bench, tuning

N = 4096
FLOPS = 2.0 * N**3


def main():
    func = tuning.matmul_workload(N, N, N, "float16", "float32")
    best = tuning.replay(tuning.database_dir("matmul_fp16_4096_template"), func)
    with tvm.transform.PassContext(config={"tirx.use_async_copy": True}):
        ex = helpers.build(best.sch)
    dev = helpers.device()
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    rng = np.random.default_rng(0)
    inputs = {
        "uniform(-1, 1), as notebook 06": lambda: rng.uniform(-1, 1, (N, N)),
        "normal(0, 1), as the cuBLAS baseline": lambda: rng.standard_normal((N, N)),
        "uniform(0, 1)": lambda: rng.uniform(0, 1, (N, N)),
        "all ones": lambda: np.ones((N, N)),
        "all zeros": lambda: np.zeros((N, N)),
    }
    print(f"{helpers.local_gpu_spec().name}; best record: {best.describe()}")
    print(f"{'inputs':38s} {'TVM ms':>8s} {'TFLOP/s':>8s} {'cuBLAS ms':>10s} {'TFLOP/s':>8s} {'ratio':>6s}")
    for name, make in inputs.items():
        a, b = make().astype("float16"), make().astype("float16")
        args = [tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev),
                tvm.runtime.tensor(np.zeros((N, N), "float32"), dev)]
        tvm_ms = float(np.median(helpers.time_function(ex.mod, dev, args, repeat=30)))
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        tc = torch.empty(N, N, device="cuda", dtype=torch.float16)
        blas_ms = bench.event_median_ms(lambda: torch.matmul(ta, tb, out=tc), torch.cuda.Event,
                                        torch.cuda.synchronize, repeat=30, warmup=3)
        print(f"{name:38s} {tvm_ms:8.4f} {FLOPS / tvm_ms / 1e9:8.1f} {blas_ms:10.4f} {FLOPS / blas_ms / 1e9:8.1f} "
              f"{blas_ms / tvm_ms:6.1%}")


if __name__ == "__main__":
    main()
