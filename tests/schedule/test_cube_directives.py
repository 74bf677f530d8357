"""The Cube directives of the general Schedule (tensorize, place, cache_read/cache_write at a
Cube scope, swizzle) and their errors: each names the stage, the loop and the fix."""

from __future__ import annotations

import pytest

from ascendsched.algo import algorithm, compute, placeholder
from ascendsched.algo import library as L
from ascendsched.errors import ScheduleError, UnsupportedError
from ascendsched.lower.pipeline import lower
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.schedule.schedule import Schedule


def gemm_bias_gelu_cast(m: int, n: int, k: int):  # noqa: ANN201 -- Algorithm
    """C = A x B, D = C + bias[j], E = gelu(D) in float32, F = float16(E)."""
    c = L.gemm_bias_gelu(m, n, k).tensor("C")
    bias = placeholder("bias", (n,), "float32")
    d = compute("D", (m, n), lambda i, j: c[i, j] + bias[j])
    e = compute("E", (m, n), lambda i, j: L.gelu_tanh(d[i, j]))
    return algorithm("gemm_bias_gelu_cast", compute("F", (m, n), lambda i, j:
                                                    e[i, j].astype("float16")))


def _gemm(m: int = 512, n: int = 512, k: int = 512) -> Schedule:
    return Schedule(L.gemm(m, n, k)).tile("C", ("i", "j"), (128, 128)).split("C", "k", 128)


def test_tensorize_on_a_loop_that_is_not_a_contraction() -> None:
    with pytest.raises(ScheduleError, match=r"tensorize\('C', 'i_o', 'mmad'\): loop 'i_o' of "
                       r"'C' is not a contraction loop .*reduce axis 'k'.*tensorize 'k_i'"):
        _gemm().tensorize("C", "i_o", "mmad")


def test_tensorize_on_a_stage_that_is_not_a_contraction() -> None:
    s = Schedule(L.gemm_softmax(128, 256, 128))
    with pytest.raises(ScheduleError, match=r"tensorize\('mx', 'k1', 'mmad'\): stage 'mx' is "
                       r"not a contraction.*Vector cores"):
        s.tensorize("mx", "k1", "mmad")


def test_tensorize_loop_that_does_not_match_the_tile_structure() -> None:
    s = _gemm().tensorize("C", "k_i").split("C", "k_i", 32)
    with pytest.raises(ScheduleError, match=r"tensorized stage 'C'.*tensorize\('C', 'k_i', "
                       r"'mmad'\) does not match the resolved tile structure.*innermost K loop, "
                       r"here 'k_i_i'.*tensorize 'k_i_i'"):
        lower(s)


def test_tensorize_of_an_unknown_intrinsic() -> None:
    with pytest.raises(ScheduleError, match=r"the intrinsic is one of 'mmad'"):
        _gemm().tensorize("C", "k_i", "wmma")


def test_placing_exp_on_the_fixpipe() -> None:
    s = Schedule(L.gemm_gelu(256, 256, 256))
    with pytest.raises(UnsupportedError, match=r"place\('D', 'fixpipe'\): the Cube core cannot "
                       r"apply the steps up to 'D' on its way out.*Place 'D' and the steps "
                       r"after it on 'vector'"):
        s.place("D", "fixpipe")


def test_placing_a_reduction_on_the_fixpipe_or_the_cube() -> None:
    s = Schedule(L.gemm_softmax(128, 256, 128))
    with pytest.raises(UnsupportedError, match=r"place\('sm', 'fixpipe'\): stage 'sm' is a "
                       r"reduction.*place it on 'vector'"):
        s.place("sm", "fixpipe")
    with pytest.raises(UnsupportedError, match=r"place\('mx', 'cube'\): the Cube runs only "
                       r"contractions.*'mx' is not one: place it on 'vector'"):
        s.place("mx", "cube")
    with pytest.raises(UnsupportedError, match=r"place\('e', 'cube'\).*'vector' or 'fixpipe'"):
        s.place("e", "cube")


def test_an_epilogue_split_over_two_units_in_the_wrong_order() -> None:
    """The Cube core applies a run of steps right after the sum, the Vector cores the rest:
    a Fixpipe stage after a Vector one cannot be built."""
    algo = L.gemm_epilogue(256, 256, 256, bias=True, relu=True)
    s = (Schedule(algo).split("C", "k", 128).tensorize("C", "k_i").place("D", "vector")
         .place("E", "fixpipe"))
    with pytest.raises(ScheduleError, match=r"'D' on vector, 'E' on fixpipe: the Cube core "
                       r"applies a run of steps right after the sum.*every stage placed on "
                       r"'fixpipe' must come before every stage placed on 'vector'"):
        lower(s)


def test_a_cube_side_stage_the_cube_cannot_apply() -> None:
    """``after`` names a stage whose steps the Cube core cannot apply on its way out (GELU):
    the error names the stage and the ways out."""
    with pytest.raises(UnsupportedError, match=r"the Cube core cannot apply the steps up to "
                       r"'E'.*keep fewer of them on it"):
        GemmSchedule(gemm_bias_gelu_cast(64, 64, 64)).epilogue_on("vector", after="E")
    with pytest.raises(ScheduleError, match=r"after='D'.*give it with 'vector'"):
        GemmSchedule(L.gemm_bias_gelu(64, 64, 64)).epilogue_on("fixpipe", after="D")


def test_tile_not_a_multiple_of_the_fractal() -> None:
    s = Schedule(L.gemm(512, 512, 512)).split("C", "i", 100).split("C", "k", 128) \
        .tensorize("C", "k_i")
    with pytest.raises(ScheduleError, match=r"split\('C', 'i', 100\): the M tile must be a "
                       r"multiple of 16.*try 112"):
        lower(s)


def test_k_loops_outside_the_tile_loops() -> None:
    s = Schedule(L.gemm(512, 512, 512)).split("C", "k", 128).split("C", "i", 128) \
        .tensorize("C", "k_i")
    with pytest.raises(ScheduleError, match=r"loops k_o, i_o do not fit the Cube model.*"
                       r"reorder\('C', 'i_o', 'k_o'\)"):
        lower(s)


def test_bind_needs_the_fused_tile_loop_and_cube_cores() -> None:
    s = _gemm().tensorize("C", "k_i").bind("C", "i_o", 4)
    with pytest.raises(ScheduleError, match=r"bind\('C', 'i_o', 4\): the Cube binds every "
                       r"output tile.*fuse\('C', 'i_o', 'j_o'\)"):
        lower(s)
    s = _gemm().tensorize("C", "k_i").fuse("C", "i_o", "j_o").bind("C", "i_o_j_o", 40)
    with pytest.raises(ScheduleError, match=r"cores=40\): a tensorized stage runs on Cube "
                       r"cores and ascend910b has 24"):
        lower(s)


def test_cache_read_at_the_wrong_loop_and_unequal_copies() -> None:
    s = _gemm().split("C", "k_i", 32).tensorize("C", "k_i_i")
    with pytest.raises(ScheduleError, match=r"cache_read\('A', 'L1', at=\('C', 'k_i_o'\)\): "
                       r"the Cube loads L1 once per L1 K step, at=\('C', 'k_o'\)"):
        lower(s.cache_read("A", "L1", at=("C", "k_i_o")).cache_read("B", "L1"))
    with pytest.raises(ScheduleError, match=r"stages A and B of a level together"):
        lower(s.cache_read("A", "L0A", copies=2))
    with pytest.raises(ScheduleError, match=r"the Cube stages A \('A'\) in L1 and L0A"):
        lower(s.cache_read("A", "L0B"))


def test_workspace_needs_a_vector_epilogue() -> None:
    s = _gemm().tensorize("C", "k_i").cache_write("C", "workspace", copies=2)
    with pytest.raises(ScheduleError, match=r"has no Vector epilogue, so no workspace"):
        lower(s)


def test_cube_directive_without_a_tensorized_stage() -> None:
    s = Schedule(L.gemm(256, 256, 256)).cache_read("A", "L1")
    with pytest.raises(ScheduleError, match=r"is a Cube directive but no stage of 'gemm' is "
                       r"tensorized; add tensorize"):
        lower(s)


def test_reduce_axis_split_without_tensorize() -> None:
    s = Schedule(L.gemm(256, 256, 256)).split("C", "i", 16).split("C", "k", 64)
    with pytest.raises(ScheduleError, match=r"split\('C', 'k', 64\): 'C' is a contraction, "
                       r"whose reduce axis splits into the Cube's K steps: add tensorize"):
        lower(s)


def test_vector_directive_on_a_tensorized_schedule() -> None:
    s = (Schedule(L.gemm_gelu(128, 128, 128)).split("C", "k", 64).tensorize("C", "k_i")
         .buffer("D", 2))
    with pytest.raises(ScheduleError, match=r"Vector-path directive.*remove it"):
        lower(s)


def test_the_schedule_prints_its_cube_directives() -> None:
    s = (_gemm().tensorize("C", "k_i").cache_read("A", "L1", at=("C", "k_o"), copies=2)
         .cache_write("C", "L0C", copies=2).fuse("C", "i_o", "j_o")
         .swizzle("C", "i_o_j_o", 2, "j"))
    text = str(s)
    for line in ("  .tensorize('C', 'k_i', 'mmad')",
                 "  .cache_read('A', 'L1', at=('C', 'k_o'), copies=2)",
                 "  .cache_write('C', 'L0C', copies=2)", "  .swizzle('C', 'i_o_j_o', 2, 'j')"):
        assert line in text.splitlines()
