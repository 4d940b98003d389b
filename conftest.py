"""pytest for the whole repository: on a machine without a GPU, spread the tests over every core
(pytest-xdist); on a GPU, run them one after another, so that timings never share the GPU."""

import pytest


def pytest_xdist_auto_num_workers(config):
    import helpers

    return 0 if helpers.gpu_available() else None  # None: one worker per core


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.suffix == ".ipynb":  # nbval: a notebook's cells run in order, in one kernel
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
