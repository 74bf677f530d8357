"""Small spaces for the autotuner tests (each point lowers in well under a second)."""

import pytest

from ascendsched.algo import library as L
from ascendsched.autotune import Cache, Evaluator, LocalExecutor, gemm_space, vector_space


@pytest.fixture
def vadd_space():
    """vadd over 64K elements: 4 tiles x 3 core counts x copies of x, z (48 points)."""
    return vector_space(L.vadd(65536), algo_code="vadd(65536)", tile=(2048, 4096, 8192, 16384),
                        cores=(4, 8, 16), copies_y=(1,))


@pytest.fixture
def gemm_small_space():
    """A 256^3 GEMM: tiles, k0 and L0 copies, some illegal by the fractal or L0 capacity."""
    return gemm_space(L.gemm(256, 256, 256), algo_code="gemm(256, 256, 256)",
                      tm=(64, 128, 256), tn=(128, 256), tk=(64, 256), k0=(64, 128),
                      l1=(2,), l0=(1, 2), l0c=(1,), cores=(4,), swizzle_w=(1,),
                      swizzle_dir=("m",))


@pytest.fixture
def evaluator(tmp_path):
    ev = Evaluator(Cache(tmp_path / "tune.sqlite"), LocalExecutor(1))
    yield ev
    ev.close()
