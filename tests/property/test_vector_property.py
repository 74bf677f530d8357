"""Random vector algorithms under random legal schedules (double buffering and multi-core
included): the synced kernel equals numpy and its trace has no race, deadlock or flag error;
a sample also goes through the emitted C++. Schedules whose buffers do not fit UB are not
legal: the planner's CapacityError rejects the example."""

from hypothesis import given, reject, settings

from ascendsched.api.check import check
from ascendsched.errors import CapacityError
from ascendsched.lower.pipeline import lower
from ascendsched.sim.checker import check_trace
from tests.kit.reference import assert_matches_reference
from tests.kit.strategies import vector_cases


def _lowered(sched):
    try:
        return lower(sched)
    except CapacityError:
        reject()


# the profile's examples in two halves (by compute dtype) that run on two cores in CI
HALF = max(50, settings.default.max_examples // 2)


def _correct_and_race_free(sched) -> None:
    k, res = assert_matches_reference(sched, kernel=_lowered(sched), trace=True)
    report = check_trace(res.trace, k.target)
    assert report.ok, f"{sched}\n{report.summary()}"


@settings(max_examples=HALF)
@given(vector_cases(("float16",)))
def test_random_float16_algorithms_and_schedules_are_correct_and_race_free(case):
    _correct_and_race_free(case[1])


@settings(max_examples=HALF)
@given(vector_cases(("float32", "int32")))
def test_random_float32_and_int32_algorithms_and_schedules_are_correct_and_race_free(case):
    _correct_and_race_free(case[1])


@settings(max_examples=30)
@given(vector_cases())
def test_random_sample_through_the_emitted_cpp(case):
    algo, sched = case
    verdicts = check(sched, kernel=_lowered(sched))
    failed = [str(v) for v in verdicts if not v.ok]
    assert not failed, f"{sched}\n" + "\n".join(failed)
