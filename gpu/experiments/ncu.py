"""Nsight Compute: run a script under ncu, read its CSV, and print kernels' profiles side by side.

A study's `profile` runs `python <script> launch KERNEL` under ncu once per kernel (`launch` is a
study of its own, unlogged: its output is the profile's) and prints one table, a column a kernel,
at the clocks timing runs see.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import tvm

import helpers
from study import error_line, table
from variants import Variant


def under_ncu(script: str, ncu_options: list[str], launch_args: list[str], timeout: float):
    """Run `python <script> <launch_args>` under Nsight Compute; the finished process, output captured."""
    command = [shutil.which("ncu"), *ncu_options, sys.executable, os.path.abspath(script), *launch_args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def ncu_raw(text: str) -> dict[str, tuple[str, str]]:
    """The metrics of the first kernel in ncu's `--csv --page raw` output: name -> (value, unit).
    Values keep ncu's spelling ("667,357"); `ncu_number` reads them."""
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    for i, header in enumerate(rows):
        if header[:2] == ["ID", "Process ID"] and i + 2 < len(rows):
            units, values = rows[i + 1], rows[i + 2]
            return {name: (values[j] if j < len(values) else "", units[j] if j < len(units) else "")
                    for j, name in enumerate(header)}
    return {}


def ncu_number(value: str) -> float | None:
    """A number as ncu's CSV writes it ("1,234.5"); None for "n/a" and the like."""
    try:
        return float(value.replace(",", ""))
    except ValueError:
        return None


NCU_SECTIONS = ["SpeedOfLight", "ComputeWorkloadAnalysis", "InstructionStats", "MemoryWorkloadAnalysis",
                "MemoryWorkloadAnalysis_Tables", "Occupancy", "LaunchStats", "SchedulerStats", "WarpStateStats"]
# Clocks as the timing runs see them: ncu's default locks them to base, which slows every kernel alike.
NCU_OPTIONS = ["--launch-skip", "2", "--launch-count", "1", "--clock-control", "none", "--csv", "--page", "raw",
               "--print-units", "base", *[x for s in NCU_SECTIONS for x in ("--section", s)]]


def ncu_stalls(m: dict, top: int = 3) -> str:
    """The `top` reasons warps waited most, in cycles per issued instruction."""
    found = []
    for name, (value, _) in m.items():
        reason = name.removeprefix("smsp__average_warps_issue_stalled_").removesuffix("_per_issue_active.ratio")
        if reason != name and (x := ncu_number(value)):
            found.append((x, reason))
    return ", ".join(f"{r} {x:.1f}" for x, r in sorted(found, reverse=True)[:top]) or "-"


def ncu_first(m: dict, *names, scale=1.0, fmt="{:,.1f}") -> str:
    """The first of the metrics `names` that `m` has, scaled and formatted; "-" if none."""
    for name in names:
        if name in m and (x := ncu_number(m[name][0])) is not None:
            return fmt.format(x * scale)
    return "-"


_NCU_LAUNCH_ROWS = {  # row label: how to read it from one kernel's metrics
    "SM clock (GHz)": lambda m: ncu_first(m, "smsp__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg.per_second",
                                          "gpc__cycles_elapsed.avg.per_second", scale=1e-9, fmt="{:.2f}"),
    "grid x block": lambda m: f"{ncu_first(m, 'launch__grid_size', fmt='{:.0f}')} x "
                              f"{ncu_first(m, 'launch__block_size', fmt='{:.0f}')}",
    "registers / thread": lambda m: ncu_first(m, "launch__registers_per_thread", fmt="{:.0f}"),
    "shared memory / block (KB)": lambda m: ncu_first(m, "launch__shared_mem_per_block_allocated", scale=1 / 1024),
    "achieved occupancy (% of 64 warps)": lambda m: ncu_first(m, "sm__warps_active.avg.pct_of_peak_sustained_active"),
}
_NCU_ISSUE_ROWS = {
    "instructions executed (millions)": lambda m: ncu_first(m, "smsp__inst_executed.sum", "sm__inst_executed.sum",
                                                            scale=1e-6),
    "issue slots busy (%)": lambda m: ncu_first(m, "sm__inst_issued.avg.pct_of_peak_sustained_active",
                                                "smsp__issue_active.avg.pct_of_peak_sustained_active"),
    "warp cycles per issued instruction": lambda m: ncu_first(m, "smsp__average_warp_latency_per_inst_issued.ratio"),
    "top stalls (cycles per instruction)": ncu_stalls,
    "shared bank conflicts, loads": lambda m: ncu_first(m, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                                                        fmt="{:,.0f}"),
    "shared bank conflicts, stores": lambda m: ncu_first(m, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
                                                         fmt="{:,.0f}"),
    "L2 hit rate (%)": lambda m: ncu_first(m, "lts__t_sector_hit_rate.pct"),
    "DRAM throughput (% of peak)": lambda m: ncu_first(m, "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                                                       "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
}


def ncu_rows(flops: float, pipes: dict) -> dict:
    """The rows of a side-by-side profile (label: reader of one kernel's metrics): time, TFLOP/s
    for a problem of `flops`, launch and occupancy, then the `pipes` rows of the study, then
    instructions, stalls, bank conflicts and memory."""
    def tflops(m: dict) -> str:
        ns = ncu_number(m.get("gpu__time_duration.sum", ("", ""))[0])
        return f"{flops / ns / 1e3:.0f}" if ns else "-"

    return {"duration (us)": lambda m: ncu_first(m, "gpu__time_duration.sum", scale=1e-3), "TFLOP/s": tflops,
            **_NCU_LAUNCH_ROWS, **pipes, **_NCU_ISSUE_ROWS}


TENSOR_PIPE_ROWS = {  # a side-by-side profile's rows for tensor-core kernels (ncu_rows' `pipes`)
    "tensor pipe busy (% of cycles)": lambda m: ncu_first(m, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"),
    "HMMA (mma.sync, WMMA) issue rate (% of peak)":
        lambda m: ncu_first(m, "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active"),
    "HGMMA (wgmma) issue rate (% of peak)":
        lambda m: ncu_first(m, "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active"),
}


NCU_MENTIONED = ("bank_conflicts", "stalled", "hit_rate", "warps_active", "inst_executed", "inst_issued",
                 "issue_active", "cycles_elapsed.avg", "dram__throughput", "duration", "launch__")


def launch_checked(name: str, a: np.ndarray, b: np.ndarray, variant: Variant | None, c_dtype: str) -> int:
    """Launch one matmul C = a @ b 4 times (a study's `profile` has ncu profile the third) and
    check the first 256 rows of C against float64: `variant`'s kernel, which writes fp32 C, or,
    for None, torch's matmul (cuBLAS) writing C in `c_dtype`, at the inputs' own precision."""
    M, N = a.shape[0], b.shape[1]
    if variant is None:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False  # cuBLAS at the inputs' own precision
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()  # copies, no kernel launches
        tc = torch.empty(M, N, device="cuda", dtype=getattr(torch, c_dtype))
        for _ in range(4):
            torch.mm(ta, tb, out=tc) if tc.dtype == ta.dtype else torch.mm(ta, tb, out_dtype=tc.dtype, out=tc)
        torch.cuda.synchronize()
        c = tc[:256].float().cpu().numpy()
    else:
        _, ex = variant.build()
        dev = helpers.device()
        fn_args = [tvm.runtime.tensor(x, dev) for x in (a, b, np.zeros((M, N), "float32"))]
        for _ in range(4):
            ex.mod["main"](*fn_args)
        dev.sync()
        c = fn_args[2].numpy()[:256]
    ref = a[:256].astype("float64") @ b.astype("float64")
    print(f"{name}: relative error on the first 256 rows {helpers.relative_error(c, ref):.1e}")
    return 0


def profile_side_by_side(script: str, kernels: list[str], rows: dict, title: str, mentioned: tuple[str, ...],
                         launch_options: tuple[str, ...] = (), kernel_names: dict[str, str] | None = None) -> int:
    """Run `python <script> launch KERNEL [launch_options]` under Nsight Compute for each kernel, at
    the clocks timing runs see; print the `rows` (label: reader of one kernel's metrics) side by side
    under `title`, then every metric whose name contains one of `mentioned`, per kernel.
    `kernel_names` (KERNEL: ncu's --kernel-name, "regex:..." allowed) profiles only the launches of
    that name, for a launch that runs other kernels too (a library's helpers, a second pass)."""
    found, status = {}, 0
    print(f"ncu {' '.join(NCU_OPTIONS)} python3 gpu/experiments/{Path(script).name} launch KERNEL "
          f"{' '.join(launch_options)}".rstrip(), flush=True)
    for kernel in kernels:
        try:
            named = ["--kernel-name", kernel_names[kernel]] if kernel in (kernel_names or {}) else []
            proc = under_ncu(script, [*named, *NCU_OPTIONS], ["launch", kernel, *launch_options], timeout=300)
        except Exception as err:  # noqa: BLE001 (a timeout, most likely)
            print(f"ncu {kernel}: {error_line(err)}", flush=True)
            status = 1
            continue
        checked = [line for line in proc.stdout.splitlines() if "relative error" in line]
        found[kernel] = metrics = ncu_raw(proc.stdout)
        name = metrics.get("Kernel Name", ("?", ""))[0]
        print(f"{checked[0] if checked else f'{kernel}: no check printed'}; kernel {name[:90]}", flush=True)
        if not metrics:
            tail = " | ".join(line.strip() for line in (proc.stdout + proc.stderr).strip().splitlines()[-4:])
            print(f"ncu {kernel}: no metrics (rc {proc.returncode}): {tail[:400]}", flush=True)
            status = 1
    if not found:
        return status or 1
    print()
    table([["", *found]] + [[label, *(read(m) if m else "-" for m in found.values())] for label, read in rows.items()],
          f"{helpers.local_gpu_spec().name}, {title}")
    print("\nevery metric of " + ", ".join(mentioned) + ", per kernel:")
    for kernel, metrics in found.items():
        for name, (value, unit) in sorted(metrics.items()):
            if any(word in name for word in mentioned):
                print(f"  {kernel:7s} {name} = {value} {unit}".rstrip())
    return status
