#!/usr/bin/env bash
# FlashInfer's paged decode kernel, built on this machine for the GPU machine (decode_flashinfer.py).
#
# Issue 45 names FlashInfer's decode kernel as a baseline "where it installs on the GPU machine". It does
# not install there as it is: flashinfer-python compiles its kernels when first called (JIT, with nvcc and
# ninja), and the GPU machine has no nvcc and no registry. This machine has both (nvcc 13, PyPI), so the
# one module the decode needs is compiled here by FlashInfer's own JIT spec, for sm_90a, and linked with
# the CUDA runtime static (this machine has no libcuda to link against; the driver is found at run time).
# The module is a TVM-FFI library (FlashInfer's kernels are exported through apache-tvm-ffi, as TVM's are),
# so the GPU machine loads it with the tvm_ffi already there, without the flashinfer package.
#
#   bash gpu/experiments/flashinfer_build.sh         (about 5 minutes the first time: torch and flashinfer
#                                                     into a scratch venv; 40 s after)
# Writes .gpu/flashinfer/batch_decode.so (1.4 MB) and build.txt (what was built, with which versions);
# carry .gpu/flashinfer along with .gpu/3 on the GPU machine. ARCH=8.0 (or 9.0a, the default) picks the GPU.
# Run it after ../shared/gpu/stage.sh, which empties .gpu.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
venv=${FLASHINFER_VENV:-/tmp/flashinfer-build}
arch=${ARCH:-9.0a}
out="$root/.gpu/flashinfer"
pins=(torch==2.11.0 flashinfer-python==0.7.4 apache-tvm-ffi==0.1.14.post1)
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c "import flashinfer" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q "${pins[@]}"
fi
toolkit=$(dirname "$(dirname "$(command -v nvcc)")")
cudart=$(find -L "$toolkit" /usr/local/cuda* -name libcudart_static.a 2>/dev/null | head -1)
[[ -n $cudart ]] || { echo "no libcudart_static.a next to nvcc: install the CUDA toolkit" >&2; exit 2; }
mkdir -p "$out"
FLASHINFER_CUDA_ARCH_LIST=$arch FLASHINFER_WORKSPACE_BASE=$venv/ws "$venv/bin/python" - "$out" "$cudart" <<'PY'
import subprocess, sys
from pathlib import Path

import tvm_ffi
import torch
import flashinfer
from flashinfer.jit.attention.modules import gen_batch_decode_module

out, cudart = Path(sys.argv[1]), Path(sys.argv[2])
# the module BatchDecodeWithPagedKVCacheWrapper.plan picks for fp16 q, K, V and O, int32 pages, d = 128,
# no positional encoding, no sliding window, no soft cap (flashinfer/decode.py, get_batch_decode_module)
spec = gen_batch_decode_module(torch.float16, torch.float16, torch.float16, torch.int32, 128, 128, 0, False, False)
spec.write_ninja()
objects = [p for p in subprocess.run(["ninja", "-C", str(spec.build_dir), "-t", "targets", "all"], check=True,
                                     capture_output=True, text=True).stdout.split("\n") if ".cuda.o:" in p]
objects = [str(spec.build_dir / o.split(":")[0]) for o in objects]
built = subprocess.run(["ninja", "-C", str(spec.build_dir), *objects], capture_output=True, text=True)  # nvcc, its flags
if built.returncode:
    sys.exit(f"nvcc failed on FlashInfer's sources:\n{built.stdout[-3000:]}")
lib = Path(tvm_ffi.__file__).parent / "lib"
subprocess.run(["c++", *objects, "-shared", "-o", str(out / "batch_decode.so"), f"-L{cudart.parent}",
                "-l:libcudart_static.a", "-ldl", "-lrt", "-lpthread", f"-L{lib}", "-ltvm_ffi", "-Wl,--no-undefined"],
               check=True)
(out / "build.txt").write_text(f"{spec.name}\nflashinfer {flashinfer.__version__}, tvm-ffi {tvm_ffi.__version__}\n")
print(f"built {out / 'batch_decode.so'} ({(out / 'batch_decode.so').stat().st_size / 1e6:.1f} MB): {spec.name}")
PY
echo "arch $arch, nvcc $(nvcc --version | tail -1)" >> "$out/build.txt"
