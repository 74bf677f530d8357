"""Random vector algorithms under random legal schedules (double buffering and multi-core
included): the synced kernel equals numpy and its trace has no race, deadlock or flag error;
a sample also goes through the emitted C++. Schedules whose buffers do not fit UB are not
legal: the planner's CapacityError rejects the example."""

from hypothesis import given, reject, settings

from ascendsched.driver import check
from ascendsched.errors import CapacityError
from ascendsched.lower.driver import lower
from ascendsched.sim.checker import check_trace
from tests.helpers import assert_matches_reference
from tests.property.strategies import vector_cases


def _lowered(sched):
    try:
        return lower(sched)
    except CapacityError:
        reject()


@given(vector_cases())
def test_random_algorithms_and_schedules_are_correct_and_race_free(case):
    algo, sched = case
    k, res = assert_matches_reference(sched, kernel=_lowered(sched), trace=True)
    report = check_trace(res.trace, k.target)
    assert report.ok, f"{sched}\n{report.summary()}"


@settings(max_examples=30)
@given(vector_cases())
def test_random_sample_through_the_emitted_cpp(case):
    algo, sched = case
    verdicts = check(sched, kernel=_lowered(sched))
    failed = [str(v) for v in verdicts if not v.ok]
    assert not failed, f"{sched}\n" + "\n".join(failed)
