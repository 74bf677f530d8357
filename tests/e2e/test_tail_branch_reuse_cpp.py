"""Softmax 9 x 6144 in 2-row tiles over 4 cores through the whole ladder, emitted C++
included: the full-tile and tail-tile versions of the loop body share UB (per-branch
lifetimes), and the syncs derived from the planned bytes order the sharing."""

import pytest

from ascendsched.api.check import check
from tests.lower.test_exclusive_branches import _softmax_rows

pytestmark = pytest.mark.slow

RUNGS = ["lower", "IR execution == numpy (y)", "IR trace race check", "g++ build of emitted C++",
         "C++ run == numpy (y)", "C++ trace == IR trace", "C++ trace race check"]


@pytest.mark.parametrize("copies", [1, 2])
def test_softmax_9_rows_bound_with_a_tail_tile_passes_every_rung(tmp_path, copies):
    vs = check(_softmax_rows(9, copies=copies), work_dir=tmp_path)
    assert [v.check for v in vs] == RUNGS
    assert all(v.ok for v in vs), "\n".join(map(str, vs))
