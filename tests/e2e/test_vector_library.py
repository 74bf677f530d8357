"""Every library vector kernel under its default and hand-written schedules (single and
double buffered, multi-core): the synced kernel equals numpy and its trace checks clean."""

import pytest

from ascendsched.algo import library as L
from ascendsched.sim.checker import check_trace
from tests.kit.reference import assert_matches_reference
from tests.kit.vector_cases import CASES, IDS, lowered


@pytest.mark.parametrize("case_id", IDS)
def test_synced_kernel_equals_reference_and_is_race_free(case_id):
    sched = CASES[IDS.index(case_id)][2]
    k, res = assert_matches_reference(sched, kernel=lowered(case_id), trace=True)
    report = check_trace(res.trace, k.target)
    assert report.ok, f"{case_id}:\n{report.summary()}"
    assert not report.races and not report.deadlocks


def test_every_library_kernel_has_default_and_three_hand_schedules():
    counts = {}
    for k, label, _ in CASES:
        counts.setdefault(k, []).append(label)
    assert set(counts) == set(L.VECTOR_KERNELS)
    for k, labels in counts.items():
        assert "default" in labels and len(labels) >= 4, (k, labels)
    kinds = " ".join(label for _, label, _ in CASES)
    assert "db" in kinds and "cores" in kinds  # double buffered and multi-core schedules
