"""Random vector algorithms under random legal schedules: IR execution equals numpy."""

from hypothesis import given

from tests.helpers import assert_matches_reference
from tests.property.strategies import vector_cases


@given(vector_cases())
def test_random_algorithms_and_schedules_match_reference(case):
    algo, sched = case
    assert_matches_reference(sched, sync=False)
