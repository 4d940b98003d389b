"""The course's shared plumbing: environment, build and inspect, check and time, records,
charts and tuning. Schedules are the lesson, so they live in the notebooks, never here.

    import helpers
    nb = helpers.start("01_vector_add")      # prints the environment banner
    m = nb.measure("vector add", sch, [a, b, c], a + b, bytes=3 * a.nbytes)

`import helpers` must take a second or two, because it is a notebook's first cell: it loads only
what every notebook needs (environment, build, check and time, records). Charts (matplotlib),
tuning (MetaSchedule) and the tensor intrinsics load on first use, e.g. `helpers.roofline(...)`.
The intrinsics are the slow part: registering them imports `tvm.s_tir.tensor_intrin`, which
builds every tensor intrinsic TVM has for every backend (half a minute on a 2-core machine), so
only the notebooks that tensorize pay for it, in the cell that needs them.
"""

import importlib

from . import lessons  # helpers.lessons.<topic>: an earlier lesson's exported cells
from .lessons import source_diff
from .baselines import cublas_time
from .bench import (Measurement, Session, WrongResult, check_args, recorded_measurements, relative_error, run, start,
                    time_function)
from .env import (DEFAULT_ARCH, GpuSpec, arch_constants, device, dram_gbps, gpu_available, listing_target,
                  local_gpu_spec, make_target, require_tensor_cores)
from .kernels import (build, cuda_diff, cuda_listing, cuda_source, fit_listing, nvcc_path, occupancy,
                      ptx, ptxas_report, require_divides, tir_diff, tir_listing)
from .matmul import matmul_case
from .records import RecordError, experiment_table

#: What loads on first use, by module: the name a notebook uses -> the module that defines it.
_LAZY = {
    "intrinsics": ("MMA_STORE_PAIRS", "mma_store_pairs"),
    "plots": ("heatmap", "roofline", "sweep", "table", "text_table", "versus_baseline"),
    "autotune": ("best_configuration", "configurations", "format_config", "ranked_configurations", "search"),
    "tuned": ("TunedKernel", "committed_database", "database_dir", "open_database", "replay", "top_kernels"),
    "tuning": ("Samples", "TuningRun", "candidate_features", "design_spaces", "make_space", "matmul_workload",
               "sample_candidates", "tune"),
}
_HOME = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name: str):
    """Load a lazily imported name (PEP 562), or the submodule of that name, on first use."""
    if name in _HOME:
        value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
    elif name in _LAZY or name == "tuning_log":
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module 'helpers' has no attribute {name!r}")
    globals()[name] = value
    return value


__all__ = sorted([name for name in dir() if not name.startswith("_") and name != "importlib"] + list(_HOME))


def __dir__():
    return sorted(set(globals()) | set(_HOME))
