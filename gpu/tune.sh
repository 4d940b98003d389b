#!/usr/bin/env bash
# Tune on the GPU machine (after .gpu/3/device.sh install), from the repo root, resumably:
#   bash gpu/tune.sh fp32 --template --minutes 9      # any further options go to 06_tune.py
#   bash gpu/tune.sh fp16 --template fp16_mma_template --minutes 9
# The database lives in /tmp/tune/<name> while the machine stays warm, so back-to-back calls
# continue one search; the first call seeds it from the committed database, if there is one.
# Each call packs the database, MetaSchedule's log and this run's output (headed by the GPU,
# date, TVM version and command) into $OUT/tuned-<name>.tgz for the developer's machine; the
# outputs of the runs behind a committed database go, one after the other, into
# gpu/experiments/results/06_tune.<name>.txt.
set -uo pipefail
source /tmp/tvm-site/env.sh
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
kind=$1; shift
# the committed database these options tune (one per design space), as 06_tune.py names it
committed=$(python3 gpu/experiments/06_tune.py --kind "$kind" "$@" --where) || exit 2
committed=${committed#"$PWD"/}
name=$(basename "$committed")
work=/tmp/tune/$name
if [[ ! -d $work && -d $committed ]]; then mkdir -p "$work" && cp -r "$committed/." "$work/"; fi
mkdir -p "$work/logs"
command="python3 gpu/experiments/06_tune.py --kind $kind $* --work-dir $work"
out=$work/logs/06_tune.$name-$(date -u +%H%M).txt
{
  echo "# $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(date -u +%F)," \
       "apache-tvm $(python3 -c 'import tvm; print(tvm.__version__)'); device run $(date -u +%H:%M) UTC: $command"
  $command --log-file "$work/logs/metaschedule.log" 2>&1
} | tee "$out"
status=${PIPESTATUS[0]}
tar czf "${OUT:-.}/tuned-$name.tgz" -C /tmp/tune "$name"
exit "$status"
