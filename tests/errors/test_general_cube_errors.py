"""Capacity errors of a general ``Schedule`` with a tensorized stage: the planner's CapacityError
names the buffer and the limit, and the hint names the records that sized it and a fix in the
general spelling (split, cache_read, cache_write, place), which then lowers; the GemmSchedule
spelling of the same plan keeps its GemmSchedule wording."""

from __future__ import annotations

import re

import pytest

from ascendsched.algo import library as L
from ascendsched.errors import CapacityError
from ascendsched.lower.pipeline import lower
from ascendsched.schedule import Schedule
from ascendsched.schedule.gemm import GemmSchedule
from tests.kit.general_cube import general_spelling

GEMM_WORDS = (".tile(", ".buffer(", ".split_k(", ".epilogue_on(", "In GEMM schedule")


def _cube(algo, *splits: tuple[str, int], k_loops: int = 0) -> Schedule:
    s = Schedule(algo)
    for axis, f in splits:
        s = s.split("C", axis, f)
    return s.tensorize("C", ("k", "k_i", "k_i_i")[k_loops])


def _error(s) -> str:  # noqa: ANN001 -- Schedule or GemmSchedule
    with pytest.raises(CapacityError) as e:
        lower(s, stop_after="apply memory plan")
    return str(e.value)


def test_l1_overflow_names_the_splits_and_cache_reads_and_the_fix_works() -> None:
    algo = L.gemm(2000, 1500, 1000)
    s = (_cube(algo, ("i", 128), ("j", 256), ("k", 512), ("k_i", 64), k_loops=2)
         .cache_read("A", "L1", at=("C", "k_o"), copies=2)
         .cache_read("B", "L1", at=("C", "k_o"), copies=2)
         .fuse("C", "i_o", "j_o").bind("C", "i_o_j_o", 12))
    msg = _error(s)
    assert re.search(r"L1 buffers need 786432 B but ascend910b L1 has 524032 B usable", msg)
    assert "b_l1: 2 copies x 262144 B, a_l1: 2 copies x 131072 B" in msg
    assert msg.splitlines()[1] == (
        "In schedule for 'gemm', tensorized stage 'C' (gemm gemm: (2000 x 1000) x "
        "(1000 x 1500), float16 -> float32 -> float16): a_l1 + b_l1 = (128 x 512 + 512 x 256) "
        "x 2 B x 2 copies, from .split('C', 'i', 128), .split('C', 'j', 256), "
        ".split('C', 'k', 512) and 2 copies (.cache_read('A', 'L1', at=('C', 'k_o'), "
        "copies=2), .cache_read('B', 'L1', at=('C', 'k_o'), copies=2)). Try a smaller factor "
        "in .split('C', 'k', 512) (or in .split('C', 'i', 128), .split('C', 'j', 256)), or "
        ".cache_read('A', 'L1', at=('C', 'k_o'), copies=1) and "
        ".cache_read('B', 'L1', at=('C', 'k_o'), copies=1).")
    assert not any(w in msg.splitlines()[1] for w in GEMM_WORDS)
    # the fix as written: the later cache_read of a level wins
    fixed = (s.cache_read("A", "L1", at=("C", "k_o"), copies=1)
             .cache_read("B", "L1", at=("C", "k_o"), copies=1))
    lower(fixed, stop_after="apply memory plan")


@pytest.mark.parametrize("scope,buffer,splits,k_loops,fix,fixed", [
    ("L0A", "a_l0", [], 0, "splitting 'k' (.split('C', 'k', 128), then tensorize its inner "
     "loop) or splitting 'i' (.split('C', 'i', 128))", ([("k", 128)], 1)),
    ("L0B", "b_l0", [], 0, "splitting 'k' (.split('C', 'k', 128), then tensorize its inner "
     "loop) or splitting 'j' (.split('C', 'j', 128))", ([("k", 128)], 1)),
    ("L0C", "c_l0", [], 0, "splitting 'i' (.split('C', 'i', 128)) or splitting 'j' "
     "(.split('C', 'j', 128))", ([("i", 128)], 0)),
], ids=["L0A", "L0B", "L0C"])
def test_l0_overflow_of_unsplit_axes_suggests_the_split(scope, buffer, splits, k_loops, fix,
                                                         fixed) -> None:
    m, n, k = {"L0A": (256, 16, 256), "L0B": (16, 256, 256), "L0C": (256, 256, 16)}[scope]
    msg = _error(_cube(L.gemm(m, n, k), *splits, k_loops=k_loops))
    assert f"{scope} buffers need" in msg and f"ascend910b {scope} has" in msg and buffer in msg
    hint = msg.splitlines()[1]
    assert hint.startswith("In schedule for 'gemm', tensorized stage 'C'")
    assert hint.endswith(f". Try {fix}.")
    assert not any(w in hint for w in GEMM_WORDS)
    lower(_cube(L.gemm(m, n, k), *fixed[0], k_loops=fixed[1]), stop_after="apply memory plan")


def test_l0c_double_buffer_fix_is_cache_write() -> None:
    msg = _error(_cube(L.gemm(256, 256, 256), ("k", 64), k_loops=1)
                 .cache_write("C", "L0C", copies=2))
    assert "L0C buffers need 262144 B but ascend910b L0C has 131072 B usable" in msg
    assert msg.endswith(", or .cache_write('C', 'L0C', copies=1).")
    assert "and 2 copies (.cache_write('C', 'L0C', copies=2))" in msg


def test_mixed_ub_overflow_names_place_and_the_fix_works() -> None:
    g = GemmSchedule(L.gemm_gelu(256, 512, 64)).tile(64, 512, 32).epilogue_on(
        "vector", rows=32, vector_cores=1)
    s = general_spelling(g)
    msg = _error(s)
    assert re.search(r"UB buffers need \d+ B but ascend910b UB has 188160 B usable", msg)
    assert "C_ws_ub" in msg
    assert msg.splitlines()[-1].endswith(
        "the Vector epilogue's step of 32 x 512 columns (its loads, its output and its "
        "temporaries), from .place('D', 'vector', rows=32, vector_cores=1) and 'j' not split "
        "(tile n = 512). Try .place('D', 'vector', rows=16, vector_cores=1) or splitting 'j' "
        "(.split('C', 'j', 256))")
    lower(s.place("D", "vector", rows=16, vector_cores=1), stop_after="apply memory plan")
    # the GemmSchedule spelling of the same plan keeps its own wording
    assert _error(g).splitlines()[-1].endswith(
        "from .epilogue_on('vector', rows=32, vector_cores=1) and the tile's n=512. Try "
        ".epilogue_on('vector', rows=16, vector_cores=1) or a smaller tile n")


def test_bias_table_overflow_names_the_split_of_j() -> None:
    algo = L.gemm_epilogue(64, 8192, 64, bias=True)
    with pytest.raises(CapacityError) as e:
        lower(_cube(algo))
    assert str(e.value).endswith(
        "the bias row of a tile, n=8192 x 4 B, does not fit the ascend910b bias table (1024 B, "
        "bias_bt), from 'j' not split (tile n = 8192). Try splitting 'j' "
        "(.split('C', 'j', 256))")
    with pytest.raises(CapacityError, match=r"from \.tile\(\.\.\., n=8192, \.\.\.\)\. Try a "
                                            r"tile n <= 256$"):
        lower(GemmSchedule(algo).tile(64, 8192, 64))


def test_a_row_too_wide_for_the_cube_under_a_row_reduction_asks_to_split_j() -> None:
    """Splitting 'j' under a row reduction is legal (row blocks, CubePlan.row_blocks), so the
    hint names it among the ways out."""
    s = Schedule(L.gemm_softmax(64, 16384, 64)).tensorize("S", "k")
    with pytest.raises(CapacityError) as e:
        lower(s)
    assert str(e.value).endswith(
        "Try splitting 'k' (.split('S', 'k', 32), then tensorize its inner loop) or splitting "
        "'i' (.split('S', 'i', 32)) or splitting 'j' (.split('S', 'j', 8192)).")
    split = Schedule(L.gemm_softmax(64, 16384, 64)).split("S", "j", 512).tensorize("S", "k")
    assert split.cube is not None and split.cube.row_blocks
    lower(split, stop_after="build")
