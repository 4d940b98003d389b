#!/usr/bin/env bash
# Mutation score of the helpers the CPU tests guard: mutmut changes one thing at a time in
# helpers/bench.py, records.py, plots.py and env.py (a + for a -, a <= for a <, a constant, a
# dropped call) and runs the CPU unit tests against each change; a change no test notices (a
# "survivor") is a behaviour nothing checks. Slow (about ten minutes on two cores), so a maintainer
# runs it by hand, not CI; the survivors judged harmless, and why, are in tools/mutation-survivors.md:
#
#   pip install -r requirements-dev.txt
#   bash tools/mutation.sh                     # all four files
#   bash tools/mutation.sh helpers/bench.py    # one file
#   MUTATION_DIR=/tmp/mut bash tools/mutation.sh --again helpers/bench.py
#                                              # after adding tests: rerun only the mutants that lived
#
# It works in a scratch copy of the tracked files (mutmut rewrites the code it mutates), prints
# the score and the survivors, and leaves the copy (its path is printed) for `mutmut show NAME`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
again=no; if [ "${1:-}" = "--again" ]; then again=yes; shift; fi
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(helpers/bench.py helpers/records.py helpers/plots.py helpers/env.py)
tests=(tests/test_bench.py tests/test_gate.py tests/test_interleaved.py tests/test_values.py tests/test_plots.py
       tests/test_records.py tests/test_env.py)
existing=(); for t in "${tests[@]}"; do [ -e "$root/$t" ] && existing+=("$t"); done; tests=("${existing[@]}")
work=${MUTATION_DIR:-$(mktemp -d -t course-mutation.XXXX)}
mkdir -p "$work"

git -C "$root" ls-files helpers tests conftest.py notebooks/results pyproject.toml | tar -C "$root" -cf - -T - | tar -C "$work" -xf -
cp "$root"/tests/*.py "$work/tests/"  # the working tree's tests, committed or not
cp "$root"/helpers/*.py "$work/helpers/"
# the tests ask gpu_available() while pytest collects them (skipif marks): a mutant there, or
# mutmut's check that a forced failure fails, would break collection rather than fail a test
sed -i 's/^\(    return bool(tvm.cuda(0).exist)\)$/\1  # pragma: no mutate/' "$work/helpers/env.py"
# mutmut reads [tool.mutmut] from pyproject.toml; the copy's pytest options run the tests in one process
python - "$work/pyproject.toml" "${files[*]}" "${tests[*]}" <<'PY'
import re, sys
path, files, tests = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
text = open(path).read()
text = re.sub(r"(?m)^addopts\s*=.*$", 'addopts = "-p no:cacheprovider"', text)
lst = lambda xs: "[" + ", ".join(f'"{x}"' for x in xs) + "]"
text += f"""
[tool.mutmut]
source_paths = ["helpers"]
only_mutate = {lst(files)}
also_copy = ["tests", "conftest.py", "notebooks", "pyproject.toml"]
pytest_add_cli_args = ["-n", "0", "-q"]
pytest_add_cli_args_test_selection = {lst(tests)}
"""
open(path, "w").write(text)
PY
cd "$work"
echo "mutating ${files[*]} in $work, against ${tests[*]}"

if [ $again = yes ]; then  # the survivors of the last run in this folder (mutmut's names)
  mutmut run $(grep -v ": killed$" results.txt | cut -d: -f1) || true
else
  mutmut run || true
fi
mutmut results --all true > results.txt
grep -v ": killed$" results.txt || true
python - <<'PY'
import collections
counts = collections.Counter(line.rsplit(": ", 1)[1].strip() for line in open("results.txt") if ": " in line)
total, killed = sum(counts.values()), counts["killed"] + counts.get("caught by type check", 0)
print(f"\n{killed} of {total} mutants killed ({killed / max(total, 1):.0%}): {dict(counts)}")
PY
