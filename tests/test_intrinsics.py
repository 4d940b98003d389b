"""helpers.MMA_STORE_PAIRS, the store of mma.sync accumulators that notebook 06's mma template uses."""

import re

import tvm

import helpers
from helpers import records, tuned, tuning

NAME = "matmul_fp16_4096_mma_template"


def _database():
    """The committed database of notebook 06's mma template: the recorded GPU's, else another GPU's
    (the stores checked below come from the template, not from the GPU that tuned it)."""
    found = [tuned.database_dir(NAME), *sorted(records.RESULTS_DIR.glob(f"*/tuning/{NAME}"))]
    path = next((p for p in found if p.is_dir()), None)
    assert path is not None, f"no GPU under notebooks/results has tuning/{NAME}: tune it on a GPU (gpu/tune.sh)"
    return path


def test_registered_with_tvms_description_of_a_16x16_store():
    intrin = tvm.s_tir.TensorIntrin.get(helpers.MMA_STORE_PAIRS)
    assert intrin.impl.same_as(helpers.mma_store_pairs)
    acc, out = intrin.desc.params
    assert (acc.scope(), [int(d) for d in acc.shape]) == ("warp", [32, 8])
    assert (out.scope(), [int(d) for d in out.shape]) == ("global", [16, 16])


def test_replayed_template_kernel_writes_c_eight_bytes_at_a_time():
    fp16 = tuning.matmul_workload(4096, 4096, 4096, "float16", "float32")
    kernel = helpers.replay(_database(), fp16)
    with tvm.transform.PassContext(config={"tirx.use_async_copy": True}):
        src = helpers.cuda_source(kernel.sch)
    stores = re.findall(r"^\s*(.*C_ptr.*=.*)$", src, flags=re.M)
    assert stores and all(s.startswith("*(float2*)(C_ptr") for s in stores), stores[:3]
    assert "mma.sync.aligned.m16n8k16" in src and "ldmatrix" in src


def test_another_gpus_database_stands_in_when_the_recorded_gpu_has_none(monkeypatch):
    monkeypatch.setenv("COURSE_RECORDED_GPU", "a-gpu-with-no-tuning")
    assert _database().is_dir() and _database().name == NAME
