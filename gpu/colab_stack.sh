#!/usr/bin/env bash
# Notebooks live on the GPU machine with Colab's compiler stack instead of the course's CUDA 13 one:
# TVM compiles every kernel with NVRTC 12.8 (libnvrtc.so.12 of nvidia-cuda-nvrtc-cu12 12.8.93, through
# cuda-bindings 12.9.7 and cuda-pathfinder 1.6.0, Colab's versions) and the CUDA 12.8 headers of
# Colab's toolkit (NVIDIA's 12.8 wheels of cudart, crt and cccl: tests/colab/toolkit.txt), while
# TVM's runtime stays on libcudart 13, as on Colab. Colab's GPU runtime of 2026-08-19 is the
# reference (tests/colab/pip-freeze.gpu.txt, tests/colab/apt-list-gpu.cuda.txt).
#
# 1. Here, once (needs the package registry; ~3 minutes, most of it xz):
#      bash gpu/colab_stack.sh stage
#    writes the git-ignored .gpu/colab/ (about 41 MB: one transfer to the GPU machine holds 64 MiB).
# 2. On the GPU machine, after the course's stack is installed there (../shared/gpu/README.md: the
#    three runs that send .gpu/1, .gpu/2, .gpu/3), send .gpu/colab along and run
#      bash gpu/colab_stack.sh run notebooks/05*.ipynb notebooks/06*.ipynb
#      bash gpu/colab_stack.sh run notebooks/07*.ipynb
#    (two runs: together they take about ten minutes there, a run's limit; prefix COURSE_COMMIT=<the
#    commit sent>, as the device's copy of .git may be stale). Each run unpacks the
#    stack into /tmp/colab-stack (once per machine), checks that TVM compiles and runs a kernel on
#    the GPU with NVRTC 12.8, runs the notebooks under nbval, and writes its log, headed by the GPU,
#    date, TVM version, the NVRTC loaded and the command, to $OUT (else logs/) as
#    colab-nvrtc12-<notebooks>.txt, for notebooks/results/<gpu>/logs/.
#
# nvcc is not switched: the machine's own (CUDA 13) still writes the PTX and ptxas reports that
# notebooks print; on Colab nvcc 12.8 does. Every kernel TVM builds and runs is NVRTC 12.8's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
payload=$root/.gpu/colab
stack=/tmp/colab-stack

stage() {
  local dl x
  dl=$(mktemp -d)
  trap "rm -rf '$dl'" EXIT
  rm -rf "$payload" && mkdir -p "$payload"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux_2_12_x86_64 --platform manylinux2010_x86_64 \
    --platform any -d "$dl" cuda-bindings==12.9.7 cuda-pathfinder==1.6.0 \
    -r "$root/tests/colab/toolkit.txt"
  mv "$dl"/cuda_bindings-*.whl "$dl"/cuda_pathfinder-*.whl "$payload/"
  x=$dl/x && mkdir -p "$x"
  for whl in "$dl"/nvidia_*.whl; do python3 -m zipfile -e "$whl" "$x"; done
  mkdir -p "$dl/include" "$dl/lib64"
  for part in cuda_runtime cuda_nvcc cuda_cccl cuda_nvrtc; do cp -r "$x/nvidia/$part/include/." "$dl/include/"; done
  find "$dl/include" -name '__init__.py' -delete
  cp "$x"/nvidia/cuda_nvrtc/lib/libnvrtc.so.12 "$x"/nvidia/cuda_nvrtc/lib/libnvrtc-builtins.so.12.8 "$dl/lib64/"
  tar -C "$dl" -cf - include | xz -6 -T0 > "$payload/include-12.8.tar.xz"
  tar -C "$dl" -cf - lib64 | xz -9 -T0 > "$payload/nvrtc-12.8.93.tar.xz"
  grep -v '^#' "$root/tests/colab/toolkit.txt" | cut -d' ' -f1 > "$payload/VERSIONS"
  printf 'cuda-bindings==12.9.7\ncuda-pathfinder==1.6.0\n' >> "$payload/VERSIONS"
  du -sh "$payload"
  echo "staged. On the GPU machine, once the course's stack is installed, send .gpu/colab along and run:"
  echo "  bash gpu/colab_stack.sh run notebooks/05*.ipynb notebooks/06*.ipynb"
  echo "  bash gpu/colab_stack.sh run notebooks/07*.ipynb"
}

install_stack() {
  [[ -f $stack/ready ]] && return 0
  [[ -d $payload ]] || { echo "no .gpu/colab here: run 'bash gpu/colab_stack.sh stage' and send .gpu/colab along" >&2; exit 3; }
  rm -rf "$stack" && mkdir -p "$stack/cuda" "$stack/site"
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$stack/site" "$payload"/*.whl
  tar -C "$stack/cuda" -xJf "$payload/include-12.8.tar.xz"
  tar -C "$stack/cuda" -xJf "$payload/nvrtc-12.8.93.tar.xz"
  # Every Python process (the notebooks' kernels too) notes at exit which libnvrtc it had loaded.
  # cuda-pathfinder looks in site-packages' nvidia/cu13/lib before nvidia/cuda_nvrtc/lib, and this
  # machine's torch (cu130) brings a libnvrtc.so.13 there; Colab's torch (cu128) brings none, so on
  # Colab it finds NVRTC 12.8. Load 12.8 first in every process: pathfinder takes a loaded one.
  cat > "$stack/site/sitecustomize.py" <<'PY'
import atexit, ctypes, os, sys
ctypes.CDLL("/tmp/colab-stack/cuda/lib64/libnvrtc.so.12", mode=os.RTLD_GLOBAL)
def _note_nvrtc():
    try:
        libs = sorted({line.split()[-1] for line in open("/proc/self/maps") if "libnvrtc" in line})
        version = ""
        if "cuda.bindings.nvrtc" in sys.modules:
            version = ".".join(map(str, sys.modules["cuda.bindings.nvrtc"].nvrtcVersion()[1:]))
        if libs or version:
            with open("/tmp/colab-stack/nvrtc-loaded.txt", "a") as f:
                f.write(f"{os.getpid()} nvrtc {version or '-'}: {' '.join(libs)}\n")
    except Exception:
        pass
atexit.register(_note_nvrtc)
PY
  touch "$stack/ready"
}

run() {
  [[ $# -gt 0 ]] || { echo "usage: bash gpu/colab_stack.sh run NOTEBOOK..." >&2; exit 2; }
  [[ -f /tmp/tvm-site/env.sh ]] || { echo "the course's stack is not installed here: ../shared/gpu/README.md (.gpu/1-3) first" >&2; exit 3; }
  install_stack
  cd "$root"
  # shellcheck disable=SC1091
  source /tmp/tvm-site/env.sh
  export PYTHONPATH=$stack/site:$root:$PYTHONPATH
  export CUDA_PATH=$stack/cuda CUDA_HOME=$stack/cuda
  export LD_LIBRARY_PATH=$stack/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  unset TVM_CUDA_NVRTC_EXTRA_OPTS
  local names out log cmd status
  names=$(for nb in "$@"; do basename "$nb" | cut -c1-2; done | paste -sd- -)
  out=${OUT:-$root/logs} && mkdir -p "$out"
  log=$out/colab-nvrtc12-$names.txt
  rm -f "$stack/nvrtc-loaded.txt"
  cmd=(python3 -m pytest -o addopts= -p no:cacheprovider --nbval-lax --nbval-current-env
       --nbval-sanitize-with tests/sanitize.cfg --nbval-cell-timeout=1200 -rs "$@")
  {
    echo "# Notebooks $names live with Colab's compiler stack instead of the course's CUDA 13 one (gpu/colab_stack.sh):"
    echo "# NVRTC 12.8 ($(grep nvrtc "$payload/VERSIONS" | paste -sd' ')), cuda-bindings 12.9.7, cuda-pathfinder 1.6.0, the CUDA 12.8"
    echo "# headers of $(grep -v -e nvrtc -e bindings -e pathfinder "$payload/VERSIONS" | paste -sd' ') in CUDA_PATH=$stack/cuda;"
    echo "# TVM's runtime on libcudart 13 as on Colab; nvcc (PTX, ptxas reports) is the machine's own."
    echo "# libnvrtc.so.12 is loaded first in every process (sitecustomize): this machine's torch cu130 has a"
    echo "# libnvrtc.so.13 where cuda-pathfinder looks first, Colab's torch cu128 has none."
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
    echo "tree: ${COURSE_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo 'working tree copy (no .git)')}"
  } > "$log" 2>&1
  python3 - >> "$log" 2>&1 <<'PY' || { cat "$log"; echo "the stack check failed: see above" >&2; exit 4; }
import re, tvm, numpy as np
from importlib import metadata
from tvm import te
from tvm.support import nvcc
import helpers
from cuda.bindings import nvrtc
a = te.placeholder((1 << 20,), "float32", name="A")
b = te.compute(a.shape, lambda i: a[i] * 2.0, name="B")
sch = tvm.s_tir.Schedule(te.create_prim_func([a, b]).with_attr("tirx.noalias", True))
i0, i1 = sch.split(sch.get_loops(sch.get_sblock("B"))[0], [None, 256])
sch.bind(i0, "blockIdx.x"); sch.bind(i1, "threadIdx.x")
dev = tvm.cuda(0)
ex = tvm.compile(sch.mod, target=tvm.target.Target.from_device(dev))  # TVM compiles with NVRTC here
x = tvm.runtime.tensor(np.arange(1 << 20, dtype="float32"), dev); y = tvm.runtime.tensor(np.zeros(1 << 20, "float32"), dev)
ex.mod["main"](x, y); ok = np.array_equal(y.numpy(), 2 * x.numpy())
libs = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libnvrtc" in l})
print(f"tvm: {tvm.__version__}, tvm-ffi {metadata.version('apache-tvm-ffi')}; TVM sees the GPU: {dev.exist}; a kernel built and run: {ok}")
print(f"nvrtc loaded: {'.'.join(map(str, nvrtc.nvrtcVersion()[1:]))} through cuda-bindings {metadata.version('cuda-bindings')} "
      f"(cuda-pathfinder {metadata.version('cuda-pathfinder')}), from {', '.join(libs)}")
cuda = nvcc.find_cuda_path()
cudart = re.search(r"#define CUDART_VERSION\s+(\d+)", open(f"{cuda}/include/cuda_runtime_api.h").read()).group(1)
print(f"headers: {cuda}/include (TVM's CUDA path), CUDART_VERSION {cudart}")
assert ok and nvrtc.nvrtcVersion()[1:] == (12, 8), "not Colab's NVRTC 12.8"
PY
  echo "command: ${cmd[*]}" >> "$log"
  cat "$log"
  set +e
  "${cmd[@]}" 2>&1 | tee -a "$log"
  status=${PIPESTATUS[0]}
  set -e
  {
    echo "libnvrtc loaded by the Python processes of this run (pid, NVRTC version through cuda-bindings, libraries):"
    sort -u "$stack/nvrtc-loaded.txt" 2>/dev/null | sed 's/^/  /' || echo "  (none noted)"
  } | tee -a "$log"
  echo "log: $log"
  return "$status"
}

case "${1:-}" in
  stage) stage ;;
  run) shift; run "$@" ;;
  *) echo "usage: bash gpu/colab_stack.sh stage | run NOTEBOOK..." >&2; exit 2 ;;
esac
