"""The split-KV merge kernel launched early: programmatic dependent launch (PDL) on Hopper.

Where 12's plan splits the keys, a call is two kernels: the staged split kernel, then `merge_splits`.
`decode_timeline.py` (H100, d857e42) traced them at 1x8k: 19.4 us of splits, 1.0 us of gap, 1.9 us of
merge; at 1x32k 57.6, 1.2 and 2.2. The gap is the second launch; most of the merge's time is its own
start and its chains of loads. With PDL (CUDA programming guide, "Programmatic Dependent Launch";
PTX ISA `griddepcontrol`) the merge kernel may launch while the split kernel still runs: its blocks start,
then wait at `griddepcontrol.wait` until every split block has finished and its writes are visible.
The split kernel says when by `griddepcontrol.launch_dependents` (here at its start, or after its loop
over the pages); TVM's launcher takes the tag `tirx.use_programtic_dependent_launch` (sic) in a kernel's
`tirx.kernel_launch_params` and launches it with cuLaunchKernelEx and programmatic stream serialization.

Each variant is a copy of `helpers.decode_mma` with `merge_splits` waiting first and the split kernel
triggering, built by the pipeline `tirx_pdl` (TVM's "tirx" pipeline, then the tag on the second kernel);
checked against the float64 reference, then timed in 9 rounds alternating with SDPA (as
`decode_mma_async.py`), flushed below 4x L2 as the notebook times.

    python gpu/experiments/decode_pdl.py [BxN ...]    (N in k; default the shapes with several splits)
    python gpu/experiments/decode_pdl.py build        (no GPU: the launch tags and the griddepcontrol in the CUDA)
"""

import inspect
import re
import sys

import tvm

import helpers
from helpers import decode, decode_mma, kernels
from helpers.decode import HKV, HQ, D
from lesson_code import edited, module_from_source

SHAPES = [(1, 8192), (8, 1024), (1, 32768), (8, 8192), (1, 131072)]
PDL_TAG = "tirx.use_programtic_dependent_launch"  # TVM's spelling


def pdl_pipeline():
    """TVM's tirx pipeline, then PDL_TAG on the launch of every second kernel (`*_kernel_1`)."""
    base, host, device = tvm.tirx.get_tir_pipeline("tirx")

    @tvm.transform.module_pass(opt_level=0)
    def tag_second(mod, _ctx):
        for gv, f in list(mod.functions.items()):
            params = f.attrs.get("tirx.kernel_launch_params") if f.attrs else None
            if params is not None and gv.name_hint.endswith("_kernel_1"):
                tags = [str(t) for t in params]
                at = len(tags) - (tags[-1:] == ["tirx.use_dyn_shared_memory"])  # that tag must stay last
                mod[gv] = f.with_attr("tirx.kernel_launch_params", tags[:at] + [PDL_TAG] + tags[at:])
        return mod

    return tvm.transform.Sequential([base, tag_second]), host, device


tvm.tirx.compilation_pipeline.register_tir_pipeline("tirx_pdl", pdl_pipeline)

IMPORT = "from helpers.lessons.decoding import LOG2E, NEG, merge_splits"
KERNEL_2 = '# kernel 2: a block per (sequence, query head), a thread per dim\n'
LOOP_END = """                T.cuda.warp_sync()  # the stage is read before a later page_async overwrites it
            T.cuda.cta_sync()  # every warp done with its stages"""
START = """            b, h, sp = T.cta_id([B, HKV, splits])
            tid = T.thread_id([THREADS])
            warp, lane = T.meta_var(tid // 32), T.meta_var(tid % 32)
            g, t = T.meta_var(lane // 4), T.meta_var(lane % 4)
            Q32 = T.decl_buffer((B, HQ, D // 2), "uint32", data=Q.data)
            pool"""


def with_pdl(where):
    """decode_paged_mma_async whose merge kernel waits by griddepcontrol and launches early, the split
    kernel triggering it at its `start` or at the `end` of its loop over the pages."""
    lesson = inspect.getsource(helpers.lessons.lesson("12_decoding"))  # the macro's own source, not its wrapper's
    at = lesson.index("@T.macro\ndef merge_splits(")
    end = re.search(r"\n(?=[^\s#])", lesson[at + len("@T.macro\n"):])
    merge = edited(lesson[at:at + len("@T.macro\n") + (end.start() if end else len(lesson))],
                   {KERNEL_2: KERNEL_2 + "        T.ptx.griddepcontrol.wait()  # the split kernel done, its writes seen\n"},
                   "merge_splits")
    trigger = "T.ptx.griddepcontrol.launch_dependents()"
    edits = {IMPORT: IMPORT.replace(", merge_splits", "")}
    if where == "start":
        edits[START] = START.replace("            pool", f"            {trigger}\n            pool")
    else:
        edits[LOOP_END] = LOOP_END.replace("            T.cuda.cta_sync()", f"            {trigger}\n            T.cuda.cta_sync()")
    src = edited(inspect.getsource(decode_mma), edits, "decode_mma") + "\n\n" + merge
    return module_from_source(f"decode_mma_pdl_{where}", src).decode_paged_mma_async


VARIANTS = (("staged", decode_mma.decode_paged_mma_async, 2, "tirx"),
            ("PDL, trigger at start", with_pdl("start"), 2, "tirx_pdl"),
            ("PDL, trigger after the loop", with_pdl("end"), 2, "tirx_pdl"))


def build_report():
    """(No GPU.) Each variant at 1x8k: its kernels' launch tags, and the griddepcontrol lines of its CUDA."""
    b, n = SHAPES[0]
    splits, chunk = helpers.lessons.lesson("12_decoding").plan_one_wave([n] * b, 132, per_sm=2)
    for name, factory, _, pipeline in VARIANTS:
        ex = kernels.build(factory(b, HQ, HKV, D, *decode.pool_size([n] * b), splits, chunk), "sm_90a", pipeline)
        src = ex.mod.imports[0].inspect_source()
        lines = [s.strip() for s in src.splitlines() if "griddepcontrol" in s]
        print(f"{name}: {len(lines)} griddepcontrol lines: {lines}")
    mod = tvm.tirx.transform.BindTarget(tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}).with_host("llvm"))(
        tvm.IRModule({"main": VARIANTS[1][1](b, HQ, HKV, D, *decode.pool_size([n] * b), splits, chunk)}))
    for gv, f in pdl_pipeline()[0](mod).functions.items():
        if f.attrs and f.attrs.get("tirx.kernel_launch_params") is not None:
            print(f"  {gv.name_hint}: {[str(t) for t in f.attrs['tirx.kernel_launch_params']]}")


if __name__ == "__main__":
    from decode_balance import parse
    from decode_mma import main

    if sys.argv[1:2] == ["build"]:
        build_report()
    else:
        main([parse(a) for a in sys.argv[1:]] or SHAPES, VARIANTS)
