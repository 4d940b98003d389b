#!/usr/bin/env bash
# Re-record notebooks on the GPU machine (after .gpu/3/device.sh install), from the repo root:
#   COURSE_COMMIT=<the commit sent> bash gpu/record.sh ...   (the device's copy of .git may be stale)
#   bash gpu/record.sh notebooks/00_gpu_architecture.ipynb notebooks/01_vector_add.ipynb ...
#   bash gpu/record.sh --pytest [tests] notebooks/05_tensor_core_tensorization.ipynb ...
# Executes each notebook with COURSE_RECORD=1, so its live measurements replace its file in
# notebooks/results/<gpu>/. Plain: in place, keeping the outputs (how the committed notebooks are
# made). --pytest: under pytest and nbval instead (the outputs are not kept), so one run both
# records a GPU's results and is the live test log of the series on it; `tests` runs the unit
# tests first. Packs the results (and the executed notebooks) into $OUT/recorded-<first>.tgz and
# the log into $OUT/record-<first>.log for the developer's machine to unpack and commit.
set -uo pipefail
source /tmp/tvm-site/env.sh
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
pytest=0
if [[ ${1:-} == --pytest ]]; then pytest=1; shift; fi
notebooks=()
for arg in "$@"; do [[ $arg == *.ipynb ]] && notebooks+=("$arg"); done
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
slug=$(python3 -c "import helpers; print(helpers.records.gpu_slug(helpers.local_gpu_spec().name))")
for nb in "${notebooks[@]}"; do rm -f "notebooks/results/$slug/$(basename "$nb" .ipynb).json"; done
first=$(basename "${notebooks[0]}" .ipynb)
log="${OUT:-.}/record-$first.log"
export COURSE_RECORD=1
if (( pytest )); then
  command="COURSE_RECORD=1 python3 -m pytest -rs $*"
else
  command="COURSE_RECORD=1 python3 -m tools.run_notebooks $*"
fi
export COURSE_RECORD_COMMAND="$command (gpu/record.sh on the $gpu device, $(date -u +%FT%RZ), commit ${COURSE_COMMIT:-$(cat .commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)})"
echo "# $gpu, $(date -u +%F) $(date -u +%R) UTC, apache-tvm $(python3 -c 'import tvm; print(tvm.__version__)'): $COURSE_RECORD_COMMAND" > "$log"
if (( pytest )); then
  python3 -m pytest -rs -p no:cacheprovider "$@" 2>&1 | tee -a "$log"
else
  python3 -m tools.run_notebooks "$@" 2>&1 | tee -a "$log"
fi
status=${PIPESTATUS[0]}
(( pytest )) && kept=() || kept=("${notebooks[@]}")
tar czf "${OUT:-.}/recorded-$first.tgz" "${kept[@]}" "notebooks/results/$slug"
exit "$status"
