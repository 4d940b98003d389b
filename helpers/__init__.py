"""The course's shared plumbing: environment, build and inspect, check and time, records,
charts and tuning. Schedules are the lesson, so they live in the notebooks, never here.

    import helpers
    nb = helpers.start("01_vector_add")      # prints the environment banner
    m = nb.measure("vector add", sch, [a, b, c], a + b, bytes=3 * a.nbytes)
"""

from .bench import (Measurement, Session, WrongResult, check_args, cublas_time, recorded_measurements, relative_error,
                    run, start, time_function)
from .env import (DEFAULT_ARCH, GpuSpec, arch_constants, device, dram_gbps, gpu_available, listing_target,
                  local_gpu_spec, make_target, require_tensor_cores)
from .intrinsics import MMA_STORE_PAIRS, mma_store_pairs
from .kernels import build, cuda_listing, cuda_source, nvcc_path, occupancy, ptx, ptxas_report, require_divides
from .plots import heatmap, roofline, sweep, table, text_table, versus_baseline
from .records import RecordError
from .tuned import TunedKernel, database_dir, open_database, replay, top_kernels
from .tuning import Samples, TuningRun, candidate_features, design_spaces, make_space, matmul_workload, sample_candidates, tune

__all__ = [name for name in dir() if not name.startswith("_")]
