"""A stand-in for Colab's `nvcc` 12.8 (/usr/local/cuda/bin/nvcc) in the simulated Colab runtime.

NVIDIA publishes no nvcc binary on PyPI (nvidia-cuda-nvcc-cu12 holds ptxas, libnvvm and the crt
headers), so tests/test_colab.py puts this script where Colab's nvcc is, in the folder that stands
for /usr/local/cuda. It does the two things the course asks of nvcc, with CUDA 12.8's own parts:
the PTX of a kernel (NVRTC 12.8, the front end nvcc 12.8 shares) and ptxas 12.8's `-v` report.
It also answers `--version` as nvcc 12.8 does, which is how TVM reads the toolkit's version.

    nvcc --version
    nvcc -arch=sm_75 -ptx -o k.ptx k.cu
    nvcc -arch=sm_75 -cubin -Xptxas -v -o k.cubin k.cu

Anything else fails with a message saying this is a stand-in. The folder's bin/nvcc runs this file
with the simulated runtime's Python and `--toolkit <the folder>` first, so ptxas is the folder's.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

VERSION = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Fri_Feb_21_20:23:50_PST_2025
Cuda compilation tools, release 12.8, V12.8.93
Build cuda_12.8.r12.8/compiler.35583870_0"""


def main(argv: list[str]) -> int:
    toolkit = Path(argv.pop(1)) if argv[:1] == ["--toolkit"] else None  # put there by bin/nvcc
    argv = argv[1:] if toolkit else argv
    if argv == ["--version"]:
        print(VERSION)
        return 0
    arch = next((a.split("=", 1)[1] for a in argv if a.startswith("-arch=")), None)
    out = argv[argv.index("-o") + 1] if "-o" in argv else None
    sources = [a for a in argv if a.endswith(".cu")]
    kind = "ptx" if "-ptx" in argv else "cubin" if "-cubin" in argv else None
    if arch is None or out is None or len(sources) != 1 or kind is None:
        print(f"nvcc (stand-in for Colab's nvcc 12.8, tests/colab/nvcc.py): unsupported command {argv}", file=sys.stderr)
        return 2
    from tvm.support import nvcc  # TVM's own NVRTC path: the same preamble and headers as its kernels

    number = arch.split("_", 1)[1]
    try:
        ptx = nvcc.compile_cuda(Path(sources[0]).read_text(), target_format="ptx", arch=f"compute_{number}",
                                compiler="nvrtc")
    except Exception as err:  # what nvcc would print: the compiler's log
        print(err, file=sys.stderr)
        return 1
    if kind == "ptx":
        Path(out).write_bytes(bytes(ptx))
        return 0
    ptx_file = Path(out).with_suffix(".ptx")
    ptx_file.write_bytes(bytes(ptx))
    ptxas = str(toolkit / "bin" / "ptxas") if toolkit else shutil.which("ptxas")
    verbose = ["-v"] if "-v" in argv and "-Xptxas" in argv else []
    done = subprocess.run([ptxas, f"-arch=sm_{number}", *verbose, "-o", out, str(ptx_file)])
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
