"""pytest for the whole repository: on a machine without a GPU, spread the tests over every core
(pytest-xdist, `--dist loadscope`: a notebook's cells stay together, in order, in one kernel); on
a GPU, run them one after another, so that timings never share the GPU. Cells tagged
`recorded-output` are compared only where the committed records are shown (tools.recorded_outputs)."""

pytest_plugins = ["tools.recorded_outputs"]


def pytest_xdist_auto_num_workers(config):
    import helpers

    return 0 if helpers.gpu_available() else None  # None: one worker per core
