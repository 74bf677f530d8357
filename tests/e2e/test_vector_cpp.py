"""Every library vector kernel under its default and hand-written schedules passes the whole
`ascendsched check` ladder: the emitted C++ built with g++ -fsanitize=address,undefined
against the host runtime, run, equal to numpy, its trace equal to the IR trace and race-free."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from ascendsched.api.check import check
from tests.kit.vector_cases import CASES, IDS, lowered

pytestmark = pytest.mark.slow  # g++ builds and runs


@pytest.fixture(scope="module")
def verdicts():
    """All cases checked up front, two at a time (the g++ builds run in parallel)."""

    def one(case_id):
        try:
            return check(CASES[IDS.index(case_id)][2], kernel=lowered(case_id), sanitize=True)
        except Exception as e:  # reported by the case's test, not as a fixture error
            return e

    for case_id in IDS:  # lower in this thread (cached), build and run in the pool
        lowered(case_id)
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(IDS, pool.map(one, IDS), strict=True))


@pytest.mark.parametrize("case_id", IDS)
def test_check_passes_every_rung(verdicts, case_id):
    vs = verdicts[case_id]
    if isinstance(vs, Exception):
        raise vs
    names = [v.check for v in vs]
    assert "g++ build of emitted C++" in names and "C++ trace == IR trace" in names, names
    failed = [str(v) for v in vs if not v.ok]
    assert not failed, f"{case_id}:\n" + "\n".join(failed)
