"""Build kernels and look inside them: the CUDA TVM wrote, the PTX, and what ptxas made of it.

The schedule is the lesson and stays in the notebook; these functions only turn a schedule
into something to run or read.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import numbers
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import tvm

from . import env

#: The widest line a printed listing keeps: what a slide and a GitHub page show without scrolling.
WIDTH = 120


def _module(kernel) -> tvm.IRModule:
    """Accept a Schedule, an IRModule or a PrimFunc; return the IRModule."""
    if isinstance(kernel, tvm.s_tir.Schedule):
        return kernel.mod
    if isinstance(kernel, tvm.IRModule):
        return kernel
    if isinstance(kernel, tvm.tirx.PrimFunc):
        return tvm.IRModule({"main": kernel})
    raise TypeError(
        f"expected a tvm.s_tir.Schedule, IRModule or PrimFunc, got {type(kernel).__name__}"
    )


def copy_kernel(n: int, threads: int = 256, vector: int = 1) -> "tvm.s_tir.Schedule":
    """B = A for n floats, `vector` floats per thread and step, `threads` a block: notebook 00's
    copy, which it writes out in TensorIR step by step, here for the notebooks that measure the
    same bandwidth ceiling again (`Session.copy_ceiling`)."""
    check_number("threads", threads)
    if vector not in (1, 2, 4) or not isinstance(vector, numbers.Integral) or isinstance(vector, bool):
        raise ValueError(f"vector must be 1, 2 or 4 floats (one load of 4, 8 or 16 bytes per thread), got {vector!r}")
    require_divides(n, threads * vector, "threads x vector")
    a = tvm.te.placeholder((n,), "float32", name="A")
    b = tvm.te.compute((n,), lambda i: a[i], name="B")
    sch = tvm.s_tir.Schedule(tvm.te.create_prim_func([a, b]).with_attr("tirx.noalias", True))
    (i,) = sch.get_loops(sch.get_sblock("B"))
    bx, tx, v = sch.split(i, factors=[None, threads, vector])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(v)
    return sch


def build(kernel, target=None, tir_pipeline="default"):
    """Compile a schedule (or module) for `target` (default: this GPU, or `DEFAULT_ARCH`), through
    the named TIR pipeline (TVM's default unless an experiment registered another). Only that: a
    session's `build` also proves the machine code of a GPU the run stands for (`prove_machine_code`)."""
    if isinstance(kernel, tvm.runtime.Executable):
        return kernel
    target = env.make_target(target) if not isinstance(target, tvm.target.Target) else target
    check_buffer_sizes(_module(kernel))
    return tvm.compile(_module(kernel), target=target, tir_pipeline=tir_pipeline)


def prove_machine_code(kernel, ex, target: tvm.target.Target, run, tir_pipeline="default") -> None:
    """Where a run stands for GPUs it does not have (`run.archs`: the architecture tests), compile a
    kernel built for them to machine code for each, as TVM does on such a GPU: ptxas refuses an
    instruction the architecture lacks. `run.compile_every_build` (the simulated Colab runtime) does
    so for every CUDA build, whatever its architecture. `run` is the session's `helpers.mode.Mode`."""
    if not ex.mod.imports or target.kind.name != "cuda":
        return
    arch = str(target.attrs.get("arch", ""))
    archs = env.simulated_archs(run)
    simulated = archs[0] if archs else None
    if simulated and arch == simulated + "a":
        # the architecture-specific target of the simulated GPU (sm_90a: wgmma, TMA), which that GPU runs too
        device_code(ex.mod.imports[0].inspect_source(), arch)
    elif simulated and arch == simulated:
        # a kernel to run on the simulated GPUs: its machine code for each
        device_code(ex.mod.imports[0].inspect_source(), simulated)
        for more in archs[1:]:
            other = tvm.compile(_module(kernel), target=env.make_target(more), tir_pipeline=tir_pipeline)
            device_code(other.mod.imports[0].inspect_source(), more)
    elif arch and run.compile_every_build:
        device_code(ex.mod.imports[0].inspect_source(), arch)


def check_buffer_sizes(mod: tvm.IRModule) -> None:
    """Refuse a kernel with an array of size zero or less (a schedule function given M=-1, say): TVM
    builds it, and it would run on nothing; or of 2^31 or more along one dimension: the kernels' loops
    count in int32, and TVM stops in an internal check deep in its passes. The sizes come from the
    function that made the kernel."""
    for gvar, func in mod.functions.items():
        arrays = [p for p in func.params if getattr(p, "shape", None)] if isinstance(func, tvm.tirx.PrimFunc) else ()
        for buf in arrays:
            sizes = [int(s) if isinstance(s, tvm.tirx.IntImm) else None for s in buf.shape]
            bad = next((axis for axis, size in enumerate(sizes) if size is not None and not 0 < size < 2**31), None)
            if bad is not None:
                shape = ", ".join(str(size if size is not None else s) for size, s in zip(sizes, buf.shape))
                raise ValueError(f"{gvar.name_hint}'s array {buf.name} has size {sizes[bad]} in dimension {bad} "
                                 f"(shape ({shape})): every size must be a positive integer below 2^31, so check the sizes "
                                 "the kernel was made with")


@functools.cache
def device_code(source: str, arch: str) -> int:
    """Compile generated CUDA to machine code for `arch` the way TVM does on a GPU (NVRTC), on a
    machine without one; return the cubin's size. This is how the architecture tests prove that a
    kernel exists on a GPU we do not have: ptxas rejects an instruction the architecture lacks."""
    from tvm.support import nvcc

    kernels = ", ".join(dict.fromkeys(re.findall(r'extern "C" __global__ void (?:__launch_bounds__\(\d+(?:, ?\d+)?\) )?(\w+)', source)))
    try:
        cubin = nvcc.compile_cuda(source, target_format="cubin", arch=arch, compiler="nvrtc")
    except Exception as err:  # NVRTC's log names the line; keep its last lines
        log = "\n".join(str(err).strip().splitlines()[-6:])
        _log_build(kernels, arch, False)
        raise RuntimeError(f"kernel {kernels} does not compile for {arch}:\n{log}") from None
    _log_build(kernels, arch, True)
    return len(cubin)


def _log_build(kernels: str, arch: str, ok: bool) -> None:
    env._log({"kernel": kernels, "arch": arch, "ok": ok})


#: What a kernel's CUDA shows when it uses an instruction older GPUs lack (see env.FEATURES):
#: TVM writes cp.async as inline PTX or as its helpers tvm_builtin_ptx_cp_async_*.
_INSTRUCTIONS = {"wgmma + TMA": r"wgmma|cp[._]async[._]bulk[._]tensor", "tensor cores": r"wmma::", "cp.async": r"cp[._]async",
                 "ldmatrix + mma.sync m16n8k16": r"m16n8k16"}


def why_not_here(kernel, spec: env.GpuSpec | None) -> str | None:
    """Why a kernel built elsewhere (a schedule replayed from another GPU's tuning, say) cannot
    run on `spec`'s GPU: an instruction the GPU lacks, or more shared memory per block than it
    has (TVM's own VerifyGPUCode check); None when it can. Build options such as
    `tirx.use_async_copy` come from the enclosing PassContext, as for `build`."""
    if spec is None:
        return None
    source = cuda_source(kernel)
    for feature, marker in _INSTRUCTIONS.items():
        reason = env.lacks(spec, feature) if re.search(marker, source) else None
        if reason:
            return reason
    from tvm.s_tir import meta_schedule as ms

    limit = spec.max_shared_memory_per_block
    target = tvm.target.Target({"kind": "cuda", "arch": spec.arch, "max_shared_memory_per_block": limit,
                                "max_threads_per_block": 1024, "thread_warp_size": 32})
    sch = kernel if isinstance(kernel, tvm.s_tir.Schedule) else tvm.s_tir.Schedule(_module(kernel))
    check = ms.postproc.VerifyGPUCode()
    check._initialize_with_tune_context(ms.TuneContext(mod=sch.mod, target=target))
    if not check.apply(sch):
        return f"its blocks need more than the {limit / 1024:,.0f} KB of shared memory this {spec.name} allows"
    return None


def cuda_source(kernel, target=None, full: bool = False) -> str:
    """The CUDA C that TVM generated, built for the fixed listing target unless told otherwise.

    By default the ~50 lines of portability preamble TVM puts before every kernel are cut, so
    the listing starts at the kernel itself; `full=True` keeps them (nvcc needs them).
    """
    ex = build(kernel, target or env.listing_target())
    if len(ex.mod.imports) == 0:
        raise ValueError(
            "no CUDA kernel was generated: no loop is bound to blockIdx/threadIdx, so TVM compiled "
            "the function for the host CPU. Bind the loops (sch.bind) to make a GPU kernel."
        )
    src = ex.mod.imports[0].inspect_source()
    if full:
        return src
    start = src.find('extern "C" __global__')
    body = src[start:] if start >= 0 else src
    # TVM declares each kernel once before defining it; the declaration adds nothing to read.
    body = re.sub(r'^extern "C" __global__[^\n{]*;\n', "", body, flags=re.M)
    return body.strip() + "\n"


def cuda_listing(kernel, lines: int = 40, target=None, wraps: int = 1) -> str:
    """The generated CUDA, shortened to read (see `fold_repeated_lines`; `wraps` as in `fit_listing`)."""
    return fold_repeated_lines(cuda_source(kernel, target), lines, wraps=wraps)


def tir_listing(kernel, lines: int = 40) -> str:
    """A schedule's TensorIR as TVMScript, shortened to fit a slide: nested loops indent by two
    spaces instead of four, and long lines and listings are shortened as in `fit_listing`."""
    mod = kernel.mod if isinstance(kernel, tvm.s_tir.Schedule) else kernel
    if not isinstance(mod, (tvm.IRModule, tvm.tirx.PrimFunc)):
        raise TypeError(f"expected a tvm.s_tir.Schedule, IRModule or PrimFunc, got {type(kernel).__name__}")
    return fit_listing(mod.script(indent_spaces=2), lines, comment="#")


def tir_diff(before, after, context: int = 1, lines: int = 40, indent: bool = True) -> str:
    """What one schedule step changed in the TensorIR: the lines of `before`'s TVMScript that
    `after` removed (`-`) and added (`+`), each change with `context` unchanged lines around it
    and a run of unchanged lines shown as `  # ... (n lines)`. This is how a ladder shows a step
    as the previous step plus its change: the few lines that moved, not the whole listing again.
    `indent=False` compares lines without their indentation (shown as `after` indents them), so
    a step that adds a loop around a nest shows that loop, not the whole nest moved right."""
    return line_diff(_module(before).script(indent_spaces=2), _module(after).script(indent_spaces=2),
                 context, lines, "#", indent)


def cuda_diff(before, after, context: int = 1, lines: int = 40, target=None) -> str:
    """`tir_diff` for the generated CUDA: what a schedule step changed in the kernel TVM wrote."""
    return line_diff(cuda_source(before, target), cuda_source(after, target), context, lines, "//")


def line_diff(old: str, new: str, context: int, lines: int, comment: str, indent: bool = True) -> str:
    """The lines of text `old` that `new` removed (`- `) and added (`+ `), each change with `context` unchanged
    lines around it and a run of unchanged lines as `{comment} ... (n lines)`: what `tir_diff`, `cuda_diff`
    and `lessons.source_diff` show, cut to `lines` lines."""
    a, b = old.splitlines(), new.splitlines()
    key = (lambda rows: rows) if indent else (lambda rows: [row.strip() for row in rows])
    out, shown = [], 0  # shown: the lines of `a` up to here are printed or counted

    def skip(upto: int) -> None:
        if upto > shown:
            indent = a[shown][: len(a[shown]) - len(a[shown].lstrip())]
            out.append(f"  {indent}{comment} ... ({upto - shown} line{'s' if upto - shown > 1 else ''})")

    for group in difflib.SequenceMatcher(None, key(a), key(b), autojunk=False).get_grouped_opcodes(context):
        skip(group[0][1])
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += ["  " + row for row in (a[i1:i2] if indent else b[j1:j2])]
            else:
                out += ["- " + row for row in a[i1:i2]] + ["+ " + row for row in b[j1:j2]]
        shown = group[-1][2]
    if not out:
        return f"{comment} (no change)"
    skip(len(a))
    return fit_listing("\n".join(out), lines, comment=comment)


def fold_repeated_lines(text: str, lines: int = 40, width: int = WIDTH, wraps: int = 1) -> str:
    """Show a run of consecutive lines that differ only in their numbers (unrolled code) as its
    first line plus a count, then shorten the result as in `fit_listing`."""
    out, prev = [], None
    for line in text.splitlines():
        shape = re.sub(r"\d+", "#", line)
        if shape == prev:
            out[-1][1] += 1
        else:
            out.append([line, 0])
        prev = shape
    folded = [line + (f"  // ... and {n} more like it" if n else "") for line, n in out]
    return fit_listing("\n".join(folded), lines, width, wraps=wraps)


def fit_listing(text: str, lines: int = 40, width: int = WIDTH, comment: str = "//", wraps: int = 1) -> str:
    """At most `lines` lines of at most `width` characters, so a listing reads on a slide and on
    GitHub without scrolling: a long line wraps onto at most `wraps` more lines (a longer one is
    cut, ending in " ..."), and when the listing is longer, its last line counts the lines left out."""
    check_number("lines", lines)  # at least the line that counts the others
    check_number("width", width, " (characters)")
    check_number("wraps", wraps, zero=True)
    rows = text.splitlines()
    pieces = [_wrap(row, width, wraps) for row in rows]
    if sum(map(len, pieces)) <= lines:
        return "\n".join(line for piece in pieces for line in piece)
    out = []
    for n, piece in enumerate(pieces):
        if len(out) + len(piece) > lines - 1:
            return "\n".join(out + [f"{comment} ... ({len(rows) - n} more lines)"])
        out += piece
    return "\n".join(out)


def _wrap(line: str, width: int, wraps: int = 1) -> list[str]:
    """One line as at most 1 + `wraps` lines of at most `width` characters: broken at the last
    space that fits, the rest indented four more; cut with " ..." if it is still too long."""
    if len(line) <= width:
        return [line]
    indent = len(line) - len(line.lstrip())
    out, more = [], " " * (indent + 4)
    while len(line) > width and len(out) < wraps:
        start = len(more) if out else indent
        cut = line.rfind(" ", start + 1, width + 1)
        cut = cut if cut > start else width
        out.append(line[:cut].rstrip())
        line = more + line[cut:].lstrip()
    if len(line) > width:
        line = line[: width - 4] + " ..."
    return out + [line]


def excerpt(text: str, pattern: str, context: int = 0, lines: int = 40, width: int = WIDTH,
            comment: str = "//") -> str:
    """The lines of a listing too long to show whole that match the regular expression `pattern`,
    each with `context` lines either side, in order: what the prose points at. A run of lines left
    out shows as one line, `// ... (n lines)`, indented as its first line; the result is shortened
    as in `fit_listing`."""
    rows = text.splitlines()
    keep = set()
    for n, row in enumerate(rows):
        if re.search(pattern, row):
            keep.update(range(max(0, n - context), min(len(rows), n + context + 1)))
    out, n = [], 0
    while n < len(rows):
        if n in keep:
            out.append(rows[n])
            n += 1
            continue
        end = next((m for m in range(n, len(rows)) if m in keep), len(rows))
        indent = rows[n][: len(rows[n]) - len(rows[n].lstrip())]
        out.append(f"{indent}{comment} ... ({end - n} line{'s' if end - n > 1 else ''})")
        n = end
    return fit_listing("\n".join(out), lines, width, comment)


def nvcc_path() -> str | None:
    """The CUDA compiler, if this machine has one."""
    return shutil.which("nvcc")


@dataclasses.dataclass(frozen=True)
class PtxasReport:
    """What ptxas says about one kernel: the resources that decide occupancy."""

    kernel: str
    arch: str
    registers: int
    shared_bytes: int
    stack_bytes: int
    spill_stores: int
    spill_loads: int

    def __str__(self) -> str:
        spill = (
            f", SPILLS {self.spill_stores} B stored / {self.spill_loads} B loaded"
            if self.spill_stores or self.spill_loads
            else ", no spills"
        )
        return (
            f"{self.kernel} ({self.arch}): {self.registers} registers/thread, "
            f"{self.shared_bytes} B shared memory/block{spill}"
        )


def _arch_of(target) -> str:
    t = env.make_target(target) if not isinstance(target, tvm.target.Target) else target
    return str(t.attrs.get("arch", env.DEFAULT_ARCH))


def compile_with_nvcc(kernel, target=None, what: str = "ptx") -> str:
    """Run nvcc on the generated CUDA; return the PTX (`what="ptx"`) or ptxas' -v report
    (`what="report"`). Raises a clear error when nvcc is missing."""
    nvcc = nvcc_path()
    if nvcc is None:
        raise RuntimeError("nvcc is not installed here: PTX and the ptxas report need a CUDA compiler")
    target = target or env.listing_target()
    arch = _arch_of(target)
    src = cuda_source(kernel, target, full=True)
    with tempfile.TemporaryDirectory() as tmp:
        cu = Path(tmp) / "kernel.cu"
        cu.write_text(src)
        if what == "ptx":
            cmd = [nvcc, f"-arch={arch}", "-ptx", "-o", str(Path(tmp) / "k.ptx"), str(cu)]
        else:
            cmd = [nvcc, f"-arch={arch}", "-cubin", "-Xptxas", "-v", "-o", str(Path(tmp) / "k.cubin"), str(cu)]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
        if proc.returncode != 0:
            raise RuntimeError(f"nvcc failed on the generated CUDA:\n{proc.stderr[-2000:]}")
        if what == "ptx":
            return (Path(tmp) / "k.ptx").read_text()
        return proc.stdout + proc.stderr


def ptx(kernel, target=None) -> str:
    """The PTX nvcc makes of the generated CUDA (the virtual ISA; ptxas turns it into SASS)."""
    return compile_with_nvcc(kernel, target, "ptx")


def ptxas_report(kernel, target=None) -> list[PtxasReport]:
    """Registers, shared memory and spills per kernel, as ptxas reports them."""
    text = compile_with_nvcc(kernel, target, "report")
    reports = []
    for block in re.split(r"ptxas info\s+: Compiling entry function ", text)[1:]:
        name = re.match(r"'([^']+)' for '([^']+)'", block)
        regs = re.search(r"Used (\d+) registers", block)
        smem = re.search(r"(\d+) bytes smem", block)
        frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", block)
        reports.append(
            PtxasReport(
                kernel=name.group(1) if name else "?",
                arch=name.group(2) if name else "?",
                registers=int(regs.group(1)) if regs else 0,
                shared_bytes=int(smem.group(1)) if smem else 0,
                stack_bytes=int(frame.group(1)) if frame else 0,
                spill_stores=int(frame.group(2)) if frame else 0,
                spill_loads=int(frame.group(3)) if frame else 0,
            )
        )
    return reports


@dataclasses.dataclass(frozen=True)
class Occupancy:
    """How many blocks of a kernel fit on one SM, and which resource stops more."""

    threads_per_block: int
    blocks_per_sm: int
    limits: dict  # resource -> blocks that resource allows
    max_threads_per_sm: int

    @property
    def occupancy(self) -> float:
        """Resident warps over the most the SM can hold."""
        return self.blocks_per_sm * self.threads_per_block / self.max_threads_per_sm

    @property
    def limited_by(self) -> str:
        return min(self.limits, key=self.limits.get)

    def __str__(self) -> str:
        parts = ", ".join(f"{k}: {v}" for k, v in self.limits.items())
        return (
            f"{self.blocks_per_sm} blocks/SM x {self.threads_per_block} threads = "
            f"{self.occupancy:.0%} occupancy, limited by {self.limited_by} ({parts})"
        )


def occupancy(spec: env.GpuSpec, threads_per_block: int, registers_per_thread: int, shared_bytes_per_block: int = 0) -> Occupancy:
    """Theoretical occupancy from the three per-SM budgets: threads, registers, shared memory."""
    check_number("threads_per_block", threads_per_block)  # whole threads, registers and bytes: 128.5 is none
    check_number("registers_per_thread", registers_per_thread)
    check_number("shared_bytes_per_block", shared_bytes_per_block, zero=True)
    if not 1 <= threads_per_block <= 1024:
        raise ValueError(f"threads_per_block must be in 1..1024, got {threads_per_block}")
    if not 1 <= registers_per_thread <= 255:
        raise ValueError(f"registers_per_thread must be in 1..255, got {registers_per_thread}")
    if shared_bytes_per_block < 0:
        raise ValueError(f"shared_bytes_per_block must be >= 0, got {shared_bytes_per_block}")
    warps = math.ceil(threads_per_block / 32)
    regs_per_warp = math.ceil(registers_per_thread * 32 / env._REG_ALLOC_UNIT) * env._REG_ALLOC_UNIT
    limits = {
        "threads": spec.max_threads_per_sm // (warps * 32),
        "registers": spec.registers_per_sm // (regs_per_warp * warps),
    }
    if shared_bytes_per_block:  # a kernel without shared memory is not limited by it
        limits["shared memory"] = spec.shared_memory_per_sm // shared_bytes_per_block
    limits["blocks"] = spec.max_blocks_per_sm
    return Occupancy(threads_per_block, min(limits.values()), limits, spec.max_threads_per_sm)


def check_number(name: str, value, what: str = "", *, integer: bool = True, zero: bool = False) -> None:
    """Refuse `value` for the argument `name` unless it is a positive integer (`integer=False`: a
    finite number; `zero`: 0 allowed too); `what` follows the rule in the message."""
    kind = numbers.Integral if integer else numbers.Real
    fits = isinstance(value, kind) and not isinstance(value, bool) and (integer or math.isfinite(value))
    if not fits or value < 0 or (value == 0 and not zero):
        rule = f"{'non-negative' if zero else 'positive'} {'integer' if integer else 'number'}"
        raise ValueError(f"{name} must be a {rule}{what}, got {value!r}")


#: The element types the course's matrix multiplies take (inputs, sums and outputs).
MATMUL_DTYPES = ("float16", "float32", "float64")


def check_matmul(M, N, K, **dtypes) -> None:
    """Refuse a matrix multiply C[M, N] = A[M, K] @ B[K, N] no kernel can compute: sizes that are
    not positive integers, or an element type (`dtype=...`, `out_dtype=...`; None: as the inputs)
    none of the course's matrix multiplies takes."""
    for name, size in (("M", M), ("N", N), ("K", K)):
        check_number(name, size)
    for name, dtype in dtypes.items():
        if dtype is not None and dtype not in MATMUL_DTYPES:
            raise ValueError(f"{name} {dtype!r} is not supported here: use {', '.join(MATMUL_DTYPES)}")


def require_divides(extent: int, factor: int, what: str = "tile") -> None:
    """Refuse a tile factor that does not divide the loop extent, naming both.

    TVM would accept such a split and guard the tail with an `if`; the course's tiled
    schedules assume whole tiles, so a shape they do not divide must be padded or refused.
    """
    check_number("extent", extent)
    if not isinstance(factor, numbers.Integral) or isinstance(factor, bool):  # 2.5, NaN, "8" would split no loop
        raise ValueError(f"{what} factor must be a positive integer, got {factor!r}")
    if factor <= 0:
        raise ValueError(f"{what} factor must be positive, got {factor}")
    if extent % factor:
        raise ValueError(
            f"{what} factor {factor} does not divide the extent {extent} "
            f"({extent} = {extent // factor} x {factor} + {extent % factor}): pad the shape to "
            f"{math.ceil(extent / factor) * factor} or choose a factor that divides {extent}"
        )
