#!/usr/bin/env bash
# Stage, for the GPU machine, every wheel requirements.txt installs (CPython 3.12), so that
# gpu/fresh_venv.sh can prove the fresh-machine path there. Run after ../shared/gpu/stage.sh, from
# the project root:  bash gpu/stage_fresh.sh        (needs the package registry)
# The TVM wheel travels in .gpu/1-3 already and the wheels .gpu/1/wheels holds are not sent twice;
# the rest goes in git-ignored folders .gpu/4, .gpu/5, ... of at most ~60 MB each (one transfer to
# the machine holds 64 MiB), a wheel larger than 30 MB in pieces that fresh_venv.sh joins again.
# Send each in its own run, back to back, with `bash .gpu/N/device.sh stash`.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
[[ -d .gpu/1/wheels ]] || { echo "run ../shared/gpu/stage.sh first" >&2; exit 2; }
dl=$(mktemp -d)
trap 'rm -rf "$dl"' EXIT
grep -v '^-e ' requirements.txt > "$dl/requirements.txt"
echo "setuptools==80.9.0" >> "$dl/requirements.txt"  # builds the editable helpers package offline
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_12_x86_64 \
  --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 --platform any -d "$dl/w" -r "$dl/requirements.txt"
rm -f "$dl"/w/apache_tvm-*.whl
for f in .gpu/1/wheels/*.whl; do rm -f "$dl/w/$(basename "$f")"; done
rm -rf .gpu/[4-9] && mkdir -p "$dl/p"
for f in "$dl"/w/*.whl; do
  if (( $(stat -c %s "$f") > 30000000 )); then split -b 28M -d -a 1 "$f" "$dl/p/$(basename "$f").part."; else mv "$f" "$dl/p/"; fi
done
n=4 size=0
mkdir -p .gpu/$n/fresh
for f in $(ls -S "$dl"/p/*); do
  s=$(stat -c %s "$f")
  if (( size + s > 60000000 )); then n=$((n + 1)); size=0; mkdir -p .gpu/$n/fresh; fi
  mv "$f" .gpu/$n/fresh/ && size=$((size + s))
done
for d in .gpu/[4-9]; do cp .gpu/1/device.sh "$d/"; done
du -sh .gpu/[4-9]
