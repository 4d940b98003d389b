#!/usr/bin/env bash
# Re-record notebooks on the GPU machine (after .gpu/3/device.sh install), from the repo root:
#   bash gpu/record.sh notebooks/00_gpu_architecture.ipynb notebooks/01_vector_add.ipynb ...
# Executes each notebook in place with COURSE_RECORD=1, so its live measurements replace its
# file in notebooks/results/<gpu>/, then packs the executed notebooks and the results into
# $OUT/recorded-<first notebook>.tgz for the developer's machine to unpack and commit.
set -uo pipefail
source /tmp/tvm-site/env.sh
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
slug=$(python3 -c "import helpers; print(helpers.records.gpu_slug(helpers.local_gpu_spec().name))")
for nb in "$@"; do rm -f "notebooks/results/$slug/$(basename "$nb" .ipynb).json"; done
export COURSE_RECORD=1
export COURSE_RECORD_COMMAND="COURSE_RECORD=1 python3 -m helpers.run_notebooks $* (gpu/record.sh on the H100 device, $(date -u +%FT%RZ))"
python3 -m helpers.run_notebooks "$@" 2>&1 | tee "${OUT:-.}/record-$(basename "$1" .ipynb).log"
status=${PIPESTATUS[0]}
tar czf "${OUT:-.}/recorded-$(basename "$1" .ipynb).tgz" "$@" "notebooks/results/$slug"
exit "$status"
