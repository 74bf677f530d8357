"""One scheduling language for Cube and Vector (issue 13): a general ``Schedule`` with a
tensorized stage lowers to the same kernel as the ``GemmSchedule`` it spells out, and a mixed
Cube + Vector kernel written that way passes the check ladder."""

from __future__ import annotations

import pytest

from ascendsched.algo import library as L
from ascendsched.api.check import check
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.schedule.schedule import Schedule
from tests.kit.general_cube import general_spelling, issue_example, kernel_text

DEFAULTS = {
    "gemm 1000^3 (tails)": lambda: L.gemm(1000, 1000, 1000),
    "gemm 256^3": lambda: L.gemm(256, 256, 256),
    "gemm_int8 520x260x300": lambda: L.gemm_int8(520, 260, 300),
    "gemm A^T": lambda: L.gemm(384, 256, 200, trans_a=True),
    "gemm B^T": lambda: L.gemm(256, 384, 520, trans_b=True),
    "batched 8x512x512x128": lambda: L.batched_gemm(8, 512, 512, 128),
    "gemm_gelu": lambda: L.gemm_gelu(512, 512, 256),
    "gemm_softmax": lambda: L.gemm_softmax(128, 256, 128),
}


@pytest.mark.parametrize("name", list(DEFAULTS))
def test_default_gemm_schedule_spelled_generally_lowers_to_the_same_kernel(name: str) -> None:
    g = schedule_for(DEFAULTS[name]())
    assert isinstance(g, GemmSchedule)
    s = general_spelling(g)
    assert s.cube is not None and s.cube.tiling == g.tiling
    assert kernel_text(lower(s)) == kernel_text(lower(g))


@pytest.mark.parametrize("make", [
    lambda a: GemmSchedule(a).tile(128, 256, 256).split_k(64).buffer("l1", 2).bind(20)
    .epilogue_on("vector", rows=16),
    lambda a: GemmSchedule(a).tile(64, 128, 128).buffer("l0c", 2).buffer("workspace", 3)
    .epilogue_on("vector", vector_cores=1).swizzle(2, "n").bind(8),
], ids=["rows", "one-vector-core"])
def test_gemm_gelu_placed_on_vector_spelled_generally(make) -> None:  # noqa: ANN001
    g = make(L.gemm_gelu(512, 512, 256))
    assert kernel_text(lower(general_spelling(g))) == kernel_text(lower(g))


def test_gemm_bias_relu_on_the_fixpipe_spelled_generally() -> None:
    algo = L.gemm_epilogue(300, 260, 200, bias=True, relu=True)
    g = (GemmSchedule(algo).tile(128, 128, 128).split_k(32).buffer("l1", 2).buffer("l0", 2)
         .bind(4).epilogue_on("fixpipe"))
    s = general_spelling(g)
    assert s.cube is not None and s.cube.vector_epilogue is None
    assert kernel_text(lower(s)) == kernel_text(lower(g))


def test_the_issue_example_lowers_like_its_gemm_schedule() -> None:
    s, g = issue_example(L.gemm(1024, 1024, 1024))
    k = lower(s)
    assert kernel_text(k) == kernel_text(lower(g))
    assert k.notes[0] == "Schedule(gemm)" and "  .tensorize('C', 'k_i_i', 'mmad')" in k.notes


def _mixed() -> Schedule:
    return (Schedule(L.gemm_gelu(64, 96, 64)).split("C", "k", 32).tensorize("C", "k_i")
            .place("D", "vector", rows=8))


def test_general_mixed_kernel_passes_the_check_ladder_without_gpp() -> None:
    got = check(_mixed(), cpp=False)
    assert all(v.ok for v in got), [v for v in got if not v.ok]
    assert any(v.check.startswith("IR execution == numpy") for v in got)


@pytest.mark.slow
def test_general_mixed_kernel_passes_the_check_ladder(tmp_path) -> None:  # noqa: ANN001
    got = check(_mixed(), work_dir=tmp_path)
    assert all(v.ok for v in got), [v for v in got if not v.ok]
    assert any(v.check.startswith("C++ run == numpy") for v in got)
