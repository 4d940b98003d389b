"""The lessons' own code, for the studies that measure it: imported the one way the course has,
`helpers.lessons` (the cells each notebook tags `export`), never read out of cells by their text.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import pathlib
import sys
import tempfile
import types

import helpers


@functools.cache
def hopper() -> types.SimpleNamespace:
    """Notebooks 07 and 08 together: 07's ladder, macros, `hopper_matmul` and VARIANTS (name -> block_n,
    stages, specialized), 08's persistent and cluster kernels and its design space (`hopper_space`)."""
    return types.SimpleNamespace(**(vars(helpers.lessons.lesson("07_hopper_wgmma_tma"))
                                    | vars(helpers.lessons.lesson("08_hopper_persistent_kernel"))))


def template(name: str, edits: dict | None = None):
    """Notebook 06's schedule template `name` (a design space: "fp16_template", ...); `edits` (old text:
    new text, each found exactly once in the function's source) makes a variant of it, defined in the
    lesson's own module so that it calls the same steps."""
    module = helpers.lessons.lesson("06_metaschedule_tuning")
    func = getattr(module, name, None)
    if not callable(func):
        raise LookupError(f"notebook 06 exports no template {name!r}")
    if not edits:
        return func
    src = edited(inspect.getsource(func), edits, f"{name} in notebook 06")
    namespace = dict(vars(module))
    exec(compile(src, f"<{name} with {len(edits)} edits>", "exec"), namespace)
    return namespace[name]


def edited(source: str, edits: dict, what: str) -> str:
    """`source` with each edit (old text: new text) made; each old text must occur exactly once, so that
    a study's variant breaks loudly, naming `what`, when the lesson's code it edits has changed."""
    for old, new in edits.items():
        if source.count(old) != 1:
            raise ValueError(f"{what} holds {old!r} {source.count(old)} times: expected once")
        source = source.replace(old, new)
    return source


def module_from_source(name: str, source: str) -> types.ModuleType:
    """`source` imported as the module `name` from a file of its own: TVMScript reads a kernel's source
    back from its module's file (as for `helpers.lessons`), so a kernel a study edits or gathers must
    live in one."""
    file = pathlib.Path(tempfile.mkdtemp(prefix="study-")) / f"{name}.py"
    file.write_text(source)
    spec = importlib.util.spec_from_file_location(name, file)
    module = sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
