"""Random legal points of the tuner's default spaces (``autotune/spaces.py``) for the library
vector kernels at sizes with tails: the schedules ``ascendsched tune`` evaluates, fused row x
column tiles, columns bound to cores, statistics at an outer loop, ``load_once`` and staged
inputs among them. Each passes ``check`` through its reduced instance (no C++): the reduced
kernel equals the full one up to sizes, its IR run equals numpy, race-free. (A sweep of 420
such points found 27 that failed "full IR == reduced IR": reduced instances that shrank an
axis a buffer holds whole, and on-chip offsets whose numbers follow the core count.) A point
the compiler refuses (CapacityError, SyncError) rejects the example."""

from __future__ import annotations

from hypothesis import event, given, reject, settings
from hypothesis import strategies as st

from ascendsched.api.check import check
from ascendsched.autotune.spaces import library_space
from ascendsched.errors import CapacityError, SyncError
from ascendsched.schedule import Schedule

SHAPES = (("softmax", (100, 3000)), ("softmax", (1000, 1000)), ("rmsnorm", (300, 5000)),
          ("layernorm", (77, 2000)), ("bias_add", (1000, 1030)), ("column_sum", (1000, 3000)))
TRIES = 200  # random points drawn until one is legal (every space has legal ones)


@st.composite
def tuner_points(draw) -> Schedule:
    name, shape = draw(st.sampled_from(SHAPES))
    space = library_space(name, *shape)
    rng = draw(st.randoms(use_true_random=False))
    for _ in range(TRIES):
        got = space.check(tuple(rng.choice(p.choices) for p in space.params))
        if got.legal and got.schedule is not None:
            assert isinstance(got.schedule, Schedule)
            return got.schedule
    raise AssertionError(f"no legal point of {name}{shape} in {TRIES} draws")


@settings(max_examples=max(20, settings.default.max_examples // 10))
@given(tuner_points())
def test_random_tuner_points_pass_check_through_their_reduced_instance(sched: Schedule) -> None:
    try:
        verdicts = check(sched, cpp=False, reduce=True)
    except (CapacityError, SyncError):
        reject()
    bad = [str(v) for v in verdicts if not v.ok]
    assert not bad, f"{sched}\n" + "\n".join(bad)
    reduced = next(v for v in verdicts if v.check == "reduced instance")
    event("reduced" if "->" in reduced.detail else "its own reduction")
