#!/usr/bin/env bash
# The live test of the whole series on the GPU machine: the README's test command over every
# notebook, one pytest run, which takes longer than one call there may last (10 minutes). So it runs
# in its own process session, which outlives the call that started it, and later calls wait on it:
#   bash gpu/live_test.sh start [pytest arguments]   # default: notebooks/
#   bash gpu/live_test.sh wait                       # up to 9 minutes; again until it says "done"
# Run the calls back to back (the machine goes back about 30 s after a call, and the run with it).
# `wait` copies the log, headed by the GPU, date, TVM version, commit and command, to
# $OUT/pytest-live.txt for notebooks/results/<gpu>/logs/. Needs .gpu/3/device.sh install first.
# Started with COURSE_RECORD=1 (and COURSE_RECORD_COMMAND), the run records as gpu/record.sh --pytest
# does, and the last `wait` packs the records it wrote into $OUT/records.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=/tmp/live-test
case ${1:-} in
  start)
    shift
    source /tmp/tvm-site/env.sh
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
    mkdir -p "$dir" && rm -f "$dir"/*
    args=("${@:-notebooks/}")
    command="python3 -m pytest -rs -p no:cacheprovider ${args[*]}"
    gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
    echo "# $gpu, $(date -u +%F) $(date -u +%R) UTC, apache-tvm $(python3 -c 'import tvm; print(tvm.__version__)')," \
      "commit ${COURSE_COMMIT:-$(cat .commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)}: $command" \
      > "$dir/log"
    setsid bash -c "$command >> '$dir/log' 2>&1; echo \$? > '$dir/rc'; echo \"# ended \$(date -u +%R) UTC\" >> '$dir/log'" \
      < /dev/null > /dev/null 2>&1 &
    echo "started: $command"
    ;;
  wait)
    for _ in $(seq 108); do [[ -f $dir/rc ]] && break; sleep 5; done
    cp "$dir/log" "${OUT:-.}/pytest-live.txt" 2>/dev/null
    tail -5 "$dir/log"
    if [[ -f $dir/rc ]]; then
      tar czf "${OUT:-.}/records.tgz" notebooks/results/*/*.json 2>/dev/null
      echo "done: exit status $(cat "$dir/rc")"
    else
      echo "still running"
    fi
    ;;
  *) echo "usage: bash gpu/live_test.sh start [pytest arguments] | wait" >&2; exit 2 ;;
esac
