"""Attention on the GPU: the baselines of notebooks 10 and 11, and the notebooks' own FlashAttention
kernels beside them.

    python gpu/experiments/10_attention.py STUDY          # on a GPU with torch: check, time, one table
    python gpu/experiments/10_attention.py STUDY --dry    # anywhere: build the kernels, ptxas' report

baselines: for each shape of issue 35 (batch x heads x sequence x head dim, fp16, causal and not),
torch's scaled_dot_product_attention with each backend present (flash, cuDNN, memory-efficient),
and TVM's own TensorIR prefill kernel (`tvm.relax.frontend.nn.llm._prefill_kernels.
_attention_sequence_prefill`, the kernel MLC-LLM runs where FlashInfer is absent), checked against
torch's math backend in float32 and timed in rounds alternating with the flash backend.
flash: notebooks 10 and 11's kernels (`lesson_kernels`: mma.sync, pipelined; wgmma + TMA, the
softmax beside the products, persistent) on the same shapes, checked, then timed in rounds
alternating with torch's flash and cuDNN backends. profile: those kernels under Nsight Compute
beside cuDNN's and flash's. notebook: the notebooks' kernels at small shapes, before a recording.
TFLOP/s count 4 * b * h * s^2 * d (halved when causal), as FlashAttention's papers do. The kernels
explored on the way to the notebooks are described, with the logs and commits that ran them, in
notes/10_11_flash_attention.md.
"""

from __future__ import annotations

import functools
import statistics
import sys
import time

import numpy as np
import tvm

import helpers
from ncu import NCU_MENTIONED, TENSOR_PIPE_ROWS, ncu_rows, profile_side_by_side
from study import Study, cli, error_line, one_of
from helpers import baselines, bench

SHAPES = [(8, 16, 4096, 128), (4, 16, 8192, 128), (16, 16, 2048, 64), (32, 16, 1024, 128)]
BACKENDS = ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION")


def tvm_prefill(heads: int, dim: int, causal: bool, target=None):
    """TVM's sequence-prefill attention: q, k, v and the output are (batch, seq, heads, dim), and the
    log-sum-exp (batch, seq, heads) comes out too; `sm_scale` is 1/sqrt(dim) as in torch."""
    from tvm.relax.frontend.nn.llm import _prefill_kernels

    target = target or helpers.env.make_target()
    func = _prefill_kernels._attention_sequence_prefill(heads, heads, dim, "float16", target, causal=int(causal),
                                                        sm_scale=1.0 / dim**0.5)
    return tvm.IRModule({"main": func})


def flops(b, h, s, d, causal):
    return 4.0 * b * h * s * s * d / (2 if causal else 1)


def dry(args) -> int:
    failed = 0
    for arch in ("sm_80", "sm_90"):
        for dim in (64, 128):
            for causal in (False, True):
                t = time.time()
                try:
                    mod = tvm_prefill(16, dim, causal, helpers.env.make_target(arch))
                    ex = helpers.build(mod, arch)
                    note = f"built in {time.time() - t:.1f} s, {len(ex.mod.imports[0].inspect_source().splitlines())} lines of CUDA"
                except Exception as err:  # noqa: BLE001 (report it, build the rest)
                    failed += 1
                    note = f"FAILED {error_line(err)}"
                print(f"TVM prefill {arch} d={dim} {'causal' if causal else 'full'}: {note}", flush=True)
    return 1 if failed else 0


def baselines_study(args) -> int:
    if args.dry:
        return dry(args)
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dev = helpers.device()
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}", flush=True)
    for b, h, s, d in SHAPES:
        for causal in (False, True):
            g = torch.Generator(device="cuda").manual_seed(0)
            q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
            with sdpa_kernel(SDPBackend.MATH):
                ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
            label = f"{b}x{h}x{s}x{d}{' causal' if causal else ''}"
            rounds = {}
            for name in BACKENDS:
                def call(name=name):
                    with sdpa_kernel(getattr(SDPBackend, name)):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                try:
                    err = float((call().float() - ref).norm() / ref.norm())
                    rounds[name] = baselines.event_rounds(call, torch.cuda.Event, torch.cuda.synchronize)
                    ms = statistics.median(rounds[name]() for _ in range(10))
                    print(f"{label:26s} torch {name:20s} {ms * 1e3:9.1f} us {flops(b, h, s, d, causal) / ms / 1e9:7.1f} "
                          f"TFLOP/s  err {err:.1e}", flush=True)
                except Exception as err:  # noqa: BLE001 (a backend absent for this shape)
                    print(f"{label:26s} torch {name:20s} not available: {error_line(err)}", flush=True)
            try:
                ex = helpers.build(tvm_prefill(h, d, causal))
                to_tvm = lambda t: tvm.runtime.tensor(t.transpose(1, 2).contiguous().cpu().numpy(), dev)  # noqa: E731
                out = tvm.runtime.tensor(np.zeros((b, s, h, d), "float16"), dev)
                lse = tvm.runtime.tensor(np.zeros((b, s, h), "float16"), dev)
                args_ = [to_tvm(q), to_tvm(k), to_tvm(v), out, lse]
                ex.mod["main"](*args_)
                dev.sync()
                got = torch.from_numpy(out.numpy()).cuda().transpose(1, 2).float()
                err = float((got - ref).norm() / ref.norm())
                if "FLASH_ATTENTION" in rounds and err < 1e-2:
                    ours, theirs, ratio = baselines.interleaved(
                        lambda: bench.time_function(ex.mod, dev, args_, repeat=1)[0], rounds["FLASH_ATTENTION"], 5)
                    ms = statistics.median(ours)
                    print(f"{label:26s} TVM prefill (TensorIR)     {ms * 1e3:9.1f} us "
                          f"{flops(b, h, s, d, causal) / ms / 1e9:7.1f} TFLOP/s  err {err:.1e}  x flash {ratio:.2f}",
                          flush=True)
                else:
                    print(f"{label:26s} TVM prefill (TensorIR)     not timed: relative error {err:.1e}", flush=True)
            except Exception as err:  # noqa: BLE001
                print(f"{label:26s} TVM prefill (TensorIR)     FAILED {error_line(err)}", flush=True)
    return 0


def sm_count() -> int:
    """This GPU's SMs: the persistent kernel's blocks (132, an H100's, to build without a GPU)."""
    return helpers.local_gpu_spec().sm_count if helpers.gpu_available() else 132


@functools.cache
def lesson_kernels(blocks: int) -> dict:
    """Every kernel of notebooks 10 and 11 as the notebooks define them: name -> (make(bh, seq, dim,
    causal), the architecture it needs or None); the persistent step runs on `blocks` blocks. The
    kernels explored before the notebooks (`flash_kernels.py`, deleted) are in
    notes/10_11_flash_attention.md, with the logs and commits that ran them."""
    nb10, nb11 = helpers.lessons.lesson("10_flash_attention"), helpers.lessons.lesson("11_flash_attention_hopper")
    from helpers.flash_hopper_persistent import persistent_flash_attention  # 11 §4 shows it as a diff

    hopper, overlapped = nb11.hopper_flash_attention, nb11.consume_overlapped
    return {"mma.sync": (nb10.flash_attention, None),
            "mma.sync pipelined": (nb10.flash_attention_pipelined, None),
            "wgmma": (hopper, "sm_90a"),
            "wgmma overlapped": (lambda *a: hopper(*a, overlapped), "sm_90a"),  # 11 §3's ping-pong step
            "wgmma persistent": (lambda *a: persistent_flash_attention(*a, blocks), "sm_90a")}


PROFILED = {  # the kernels `profile` puts side by side: ours by lesson_kernels name, torch's by backend
    "plain": "wgmma",
    "overlap": "wgmma overlapped",
    "cudnn": "CUDNN_ATTENTION",
    "flash": "FLASH_ATTENTION",
    "mma": "mma.sync pipelined",
}


def ptxas_line(kernel, arch: str) -> str:
    """ptxas' registers, shared memory and spills for a TIRx kernel built for `arch` (helpers'
    report takes the built executable as it is, so the TIRx pipeline it was built with stays)."""
    return "; ".join(map(str, helpers.ptxas_report(helpers.build(kernel, arch, tir_pipeline="tirx"), arch)))


def flash_dry(args) -> int:
    failed = 0
    for arch in ("sm_80", "sm_90"):
        for name, (make, needs) in lesson_kernels(sm_count()).items():
            for d in (64, 128):
                for causal in (False, True):
                    try:
                        if needs and arch != "sm_90":
                            continue
                        note = ptxas_line(make(1, 1024, d, causal), needs or arch)
                    except Exception as err:  # noqa: BLE001
                        failed += 1
                        note = f"FAILED {error_line(err)}"
                    print(f"{arch} {name} d={d} {'causal' if causal else 'full'}: {note}", flush=True)
    return 1 if failed else 0


def flash_study(args) -> int:
    """Each variant checked against float32 (torch's math backend) and timed in rounds alternating
    with the flash and cuDNN backends."""
    if args.dry:
        return flash_dry(args)
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dev = helpers.device()
    shapes = SHAPES if not args.quick else SHAPES[:1]
    for b, h, s, d in shapes:
        for causal in (False, True):
            g = torch.Generator(device="cuda").manual_seed(0)
            q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
            q[0, 0, :4] *= 40  # a few large logits: the online softmax must stay finite
            with sdpa_kernel(SDPBackend.MATH):
                ref = torch.cat([F.scaled_dot_product_attention(q[i:i + 1].float(), k[i:i + 1].float(),
                                                                v[i:i + 1].float(), is_causal=causal) for i in range(b)])
            label = f"{b}x{h}x{s}x{d}{' causal' if causal else ''}"
            base = {}
            for name in ("FLASH_ATTENTION", "CUDNN_ATTENTION"):
                def call(name=name):
                    with sdpa_kernel(getattr(SDPBackend, name)):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                try:
                    call()
                    base[name] = baselines.event_rounds(call, torch.cuda.Event, torch.cuda.synchronize)
                except Exception as err:  # noqa: BLE001
                    print(f"{label:24s} {name} not available: {error_line(err)}", flush=True)
            q3, k3, v3 = (t.view(b * h, s, d) for t in (q, k, v))
            o3 = torch.empty_like(q3)
            for vname, (make, arch) in lesson_kernels(sm_count()).items():
                if args.only and not any(part in vname for part in args.only.split(",")):
                    continue
                try:
                    ex = helpers.build(make(b * h, s, d, causal), arch, tir_pipeline="tirx")
                    ours = baselines.on_torch_stream(ex.mod["main"], dev, [q3, k3, v3, o3])
                    o3.zero_()
                    ours()
                    torch.cuda.synchronize()
                    got = o3.view(b, h, s, d).float()
                    finite = bool(torch.isfinite(got).all())
                    err = float((got - ref).norm() / ref.norm())
                    if not finite or err > 1e-2:
                        print(f"{label:24s} {vname:40s} WRONG: relative error {err:.1e}, finite {finite}", flush=True)
                        continue
                    mine = baselines.event_rounds(ours, torch.cuda.Event, torch.cuda.synchronize)
                    times = {"ours": [], **{n: [] for n in base}}
                    for _ in range(7):
                        times["ours"].append(mine())
                        for n, r in base.items():
                            times[n].append(r())
                    ms = statistics.median(times["ours"])
                    ratios = "  ".join(f"x {n.split('_')[0].lower()} {statistics.median(t / o for t, o in zip(times[n], times['ours'])):.3f}"
                                       f" ({flops(b, h, s, d, causal) / statistics.median(times[n]) / 1e9:.0f})" for n in base)
                    print(f"{label:24s} {vname:40s} {ms * 1e3:8.1f} us {flops(b, h, s, d, causal) / ms / 1e9:6.1f} TFLOP/s "
                          f"err {err:.1e}  {ratios}", flush=True)
                except Exception as err:  # noqa: BLE001
                    print(f"{label:24s} {vname:40s} FAILED {error_line(err)}", flush=True)
            del ref
            torch.cuda.empty_cache()
    return 0


def launch(args) -> int:
    """One kernel of PROFILED launched 4 times on 8x16x4096x128 fp16 inputs copied from the host (no
    other kernel runs first, so ncu's --launch-skip 2 profiles the third call); check one head."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    b, h, s, d = SHAPES[0]
    rng = np.random.default_rng(0)
    q, k, v = (torch.from_numpy(rng.standard_normal((b, h, s, d), dtype=np.float32).astype(np.float16)).cuda()
               for _ in range(3))
    name = PROFILED[args.kernel]
    if name in BACKENDS:
        with sdpa_kernel(getattr(SDPBackend, name)):
            for _ in range(4):
                out = F.scaled_dot_product_attention(q, k, v)
    else:
        make, arch = lesson_kernels(sm_count())[name]
        ex = helpers.build(make(b * h, s, d, False), arch, tir_pipeline="tirx")
        q3, k3, v3 = (t.view(b * h, s, d) for t in (q, k, v))
        out = torch.empty_like(q3)
        call = baselines.on_torch_stream(ex.mod["main"], helpers.device(), [q3, k3, v3, out])
        for _ in range(4):
            call()
        out = out.view(b, h, s, d)
    torch.cuda.synchronize()
    qf, kf, vf = (t[0, 0].double() for t in (q, k, v))
    ref = torch.softmax(qf @ kf.T / d**0.5, -1) @ vf
    print(f"{args.kernel}: relative error {float((out[0, 0].double() - ref).norm() / ref.norm()):.1e}")
    return 0


def profile(args) -> int:
    """Our Hopper kernels beside cuDNN's and the flash backend's under Nsight Compute, at the clocks
    timing runs see: where each waits, and how busy the tensor and exponential pipes are."""
    b, h, s, d = SHAPES[0]
    if args.dry:
        for key, name in PROFILED.items():
            if name not in BACKENDS:
                make, arch = lesson_kernels(sm_count())[name]
                print(f"{key}: {ptxas_line(make(b * h, s, d, False), arch or 'sm_80')}")
        return 0
    return profile_side_by_side(__file__, list(PROFILED), ncu_rows(flops(b, h, s, d, False), TENSOR_PIPE_ROWS),
                                f"{b}x{h}x{s}x{d} fp16 attention, not causal",
                                ("tensor", "gmma", "pipe_xu", "pipe_fma", "pipe_alu", *NCU_MENTIONED))


def notebook_kernels(args) -> int:
    """Every kernel of notebooks 10 and 11 as the notebooks define them, checked against torch's
    float32 attention at small shapes (head dim 64 and 128, causal and not), before a recording:
    run it under `timeout`, since a kernel whose barriers disagree hangs rather than fails."""
    import torch

    kernels = lesson_kernels(7)  # fewer blocks than work items: each block takes several
    failed = 0
    for b, hd, s, d in [(2, 3, 512, 64), (1, 4, 1024, 128), (2, 2, 384, 128)]:
        for causal in (False, True):
            g = torch.Generator(device="cuda").manual_seed(0)
            q, k, v = (torch.randn(b * hd, s, d, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
            q[0, :4] *= 40
            ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
            for name, (make, arch) in kernels.items():
                ex = helpers.build(make(b * hd, s, d, causal), arch, tir_pipeline="tirx")
                o = torch.full_like(q, float("nan"))
                baselines.on_torch_stream(ex.mod["main"], helpers.device(), [q, k, v, o])()
                torch.cuda.synchronize()
                err = float((o.float() - ref).norm() / ref.norm())
                ok = bool(torch.isfinite(o).all()) and err < 2e-3
                failed += not ok
                print(f"{b}x{hd}x{s}x{d}{' causal' if causal else '':7s} {name:20s} relative error {err:.1e}"
                      f"{'' if ok else '  WRONG'}", flush=True)
    return 1 if failed else 0


STUDIES = {
    "baselines": Study(baselines_study, "torch's SDPA backends and TVM's prefill kernel on the issue's shapes"),
    "flash": Study(flash_study, "notebooks 10 and 11's FlashAttention kernels, checked and timed beside flash and cuDNN",
                   arguments=((("--quick",), dict(action="store_true", help="only the first shape")),
                              (("--only",), dict(default=None, help="only the variants whose name holds one of these (comma-separated)"))),),
    "notebook": Study(notebook_kernels, "notebooks 10 and 11's kernels, checked at small shapes before a recording",
                      dry=False),
    "profile": Study(profile, "Nsight Compute: the notebooks' Hopper and mma.sync kernels beside cuDNN's and flash's",
                     needs=("torch", "ncu")),
    "launch": Study(launch, "(run by profile under ncu) build, launch 4 times and check one kernel", dry=False,
                    needs=("torch",), logged=False, arguments=((("kernel",), dict(type=one_of(list(PROFILED)))),)),
}

if __name__ == "__main__":
    sys.exit(cli(__file__, __doc__, STUDIES))
