#!/usr/bin/env bash
# The fresh-machine path, proven on the GPU machine: a virtual environment that does NOT see the
# machine's own packages (no torch, cupy or cuda-bindings unless requirements.txt brings them)
# gets exactly what requirements.txt installs, from the wheels staged by ../shared/gpu/stage.sh and
# gpu/stage_fresh.sh (after .gpu/3/device.sh install), then runs notebooks live under nbval:
#   bash gpu/fresh_venv.sh notebooks/01_vector_add.ipynb notebooks/05_tensor_core_tensorization.ipynb
# The log (pip's install, the packages, what helpers says of the GPU, pytest) goes to $OUT/fresh-venv.log.
set -uo pipefail
stash=/root/gpu-stash
log=${OUT:-.}/fresh-venv.log
cd "$stash/fresh" && for first in *.part.0; do [[ -f $first ]] && cat "${first%.0}".* > "${first%.part.0}" && rm "${first%.0}".*; done
cp /tmp/"$(cat "$stash/wheel-name")" "$stash/fresh/"
cd - > /dev/null
env -u PYTHONPATH python3 -m venv /tmp/fresh
py=/tmp/fresh/bin/python
{
  echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(date -u +%F) $(date -u +%R) UTC:" \
       "python3 -m venv /tmp/fresh (no system site-packages); pip install --no-index -r requirements.txt; pytest $*"
  env -u PYTHONPATH $py -m pip install -q --no-index --find-links "$stash/fresh" --find-links "$stash/wheels" -r requirements.txt \
    && echo "installed: $(env -u PYTHONPATH $py -m pip list --format=freeze | tr '\n' ' ')"
  env -u PYTHONPATH $py -c "import importlib.util as u; print('torch, cupy in the venv:', u.find_spec('torch') is not None, u.find_spec('cupy') is not None)"
  env -u PYTHONPATH $py -c "import helpers, tvm; print(helpers.env.banner_line(helpers.local_gpu_spec() if helpers.gpu_available() else None)); print('TVM sees the GPU:', tvm.cuda(0).exist, '| CUDA_PATH', __import__('os').environ.get('CUDA_PATH'))"
  env -u PYTHONPATH $py -m pytest -rs -p no:cacheprovider "$@"
} 2>&1 | tee "$log"
exit "${PIPESTATUS[0]}"
