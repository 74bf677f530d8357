"""Rank-3 defaults (batched softmax and RMSNorm tiled along the middle axis) through the whole
ladder, emitted C++ included; the (4, 2048, 2048) kernels through their reduced instance."""

import pytest

from ascendsched.api.check import check
from tests.schedule.test_defaults_rank3 import KERNELS

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("shape", [(2, 384, 384), (4, 2048, 2048)])
def test_rank3_default_passes_every_rung(tmp_path, name, shape):
    vs = check(KERNELS[name](*shape), work_dir=tmp_path)
    assert all(v.ok for v in vs), "\n".join(map(str, vs))
    assert any(v.check == "C++ run == numpy (y)" for v in vs)
    assert any(v.check == "reduced instance" for v in vs) == (shape[0] == 4)
