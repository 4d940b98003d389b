"""The house rules CONTRIBUTING states, held: small units in the code rooms (helpers, gpu, tools), and
the environment read in one place (helpers.mode; helpers.driver points NVRTC at NVIDIA's wheels)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CODE = sorted(p for room in ("helpers", "gpu", "tools") for p in (ROOT / room).rglob("*.py"))


@pytest.mark.parametrize("path", CODE, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_file_over_500_lines_and_no_function_over_80(path):
    text = path.read_text()
    assert len(text.splitlines()) <= 500, f"{path.name} has {len(text.splitlines())} lines: split it by role"
    long = [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(text))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80]
    assert not long, f"{path.name}: functions over 80 lines {long}: split them into steps"


def test_only_the_mode_reads_the_environment():
    readers = sorted(p.name for p in (ROOT / "helpers").glob("*.py") if "os.environ" in p.read_text())
    assert readers == ["driver.py", "mode.py"], f"helpers modules reading os.environ: {readers}; ask helpers.mode"
