"""Row softmax, scheduled by hand: 8-row tiles over 4 vector cores, double-buffered I/O.

    ascendsched explain examples/softmax.py:schedule
    ascendsched check examples/softmax.py:schedule
"""

from ascendsched.algo.library import softmax
from ascendsched.schedule import Schedule


def schedule() -> Schedule:
    algo = softmax(m=64, n=1024)
    s = Schedule(algo).split("y", "i", 8).bind("y", "i_o", cores=4)
    for stage in ("xf", "mx", "e", "s"):  # max, exp and sum fused in one row tile
        s = s.compute_at(stage, "y", "i_o")
    return s.buffer("x", copies=2).buffer("y", copies=2)


def algorithm():
    """The same algorithm with no schedule: ascendsched picks the default."""
    return softmax(m=64, n=1024)


def space():
    """A search space for ``ascendsched tune examples/softmax.py:algorithm --space
    examples/softmax.py:space``: row tiles and core counts, every placement and buffering."""
    from ascendsched.autotune import vector_space

    return vector_space(algorithm(), rows=(2, 4, 8), cols=("whole",), cores=(4, 8))
