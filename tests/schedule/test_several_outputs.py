"""Several outputs per kernel: quantised values and their row scale from one pass over x."""

import numpy as np
import pytest

from ascendsched.algo import (
    algorithm,
    clip,
    compute,
    evaluate,
    placeholder,
    reduce_axis,
    reduce_max,
)
from ascendsched.errors import ScheduleError
from ascendsched.lower.pipeline import lower
from ascendsched.schedule import Schedule
from ascendsched.sim.execute import run_kernel
from tests.kit.reference import assert_matches_reference


def quantise(m: int = 9, n: int = 256, first: str = "q"):
    """Symmetric int8 quantisation per row: scale = max|x| / 127, q = round(x / scale)."""
    x = placeholder("x", (m, n), "float32")
    k = reduce_axis(n, "k")
    amax = compute("amax", (m,), lambda i: reduce_max(abs(x[i, k]), k))
    scale = compute("scale", (m,), lambda i: amax[i] / 127.0)
    q = compute("q", (m, n), lambda i, j: clip(round(x[i, j] / scale[i]), -127.0, 127.0)
                .astype("int8"))
    return algorithm("quant", [q, scale] if first == "q" else [scale, q])


def test_quantised_values_and_row_scale_in_one_kernel():
    a = quantise()
    s = Schedule(a).split("q", "i", 2).bind("q", "i_o", 3).compute_at("amax", "q", "i_o") \
        .buffer("x").buffer("q")
    assert s.root().name == "q"
    k, _ = assert_matches_reference(s)
    assert [p.name for p in k.params if p.kind == "output"] == ["q", "scale"]
    x = np.random.default_rng(5).uniform(-2, 2, (9, 256)).astype(np.float32)
    got = run_kernel(k, {"x": x}).outputs
    want_scale = np.abs(x).max(axis=1) / np.float32(127)
    np.testing.assert_allclose(got["scale"], want_scale, rtol=1e-6)
    np.testing.assert_array_equal(got["q"], np.clip(np.rint(x / want_scale[:, None]), -127, 127)
                                  .astype(np.int8))


def test_output_order_does_not_matter_and_same_shape_siblings_work():
    a = quantise(first="scale")
    assert Schedule(a).root().name == "q"
    assert_matches_reference(Schedule(a).split("q", "i", 4).compute_at("amax", "q", "i_o"))
    x = placeholder("x", (9, 256), "float32")
    y1 = compute("y1", (9, 256), lambda i, j: x[i, j] + 1.0)
    y2 = compute("y2", (9, 256), lambda i, j: x[i, j] * 2.0)
    assert_matches_reference(Schedule(algorithm("pair", [y1, y2])).tile("y1", ("i", "j"),
                                                                         (4, 128)))


def test_an_output_several_tiles_would_store_is_refused():
    s = Schedule(quantise()).split("q", "i", 2).split("q", "j", 128) \
        .compute_at("amax", "q", "j_o")
    with pytest.raises(ScheduleError, match=r"'scale' does not vary along 'j'.*follows \(i\)"):
        lower(s, stop_after="apply memory plan")
    with pytest.raises(ScheduleError, match=r"'scale' is an output.*computed in 'q''s tile"):
        Schedule(quantise()).split("q", "i", 2).compute_at("scale", "q", "i_o")


def test_reference_keeps_both_outputs():
    x = np.ones((9, 256), np.float32)
    vals = evaluate(quantise(), {"x": x})
    assert (vals["q"] == 127).all() and np.allclose(vals["scale"], 1 / 127)


def test_the_default_schedule_of_several_outputs_tiles_the_root_and_checks():
    """Issue 15: the default generator called compute_at on the second output (an error the
    user never caused); it now tiles the root output and lets the others ride in its tile."""
    from ascendsched.algo import algorithm, compute, placeholder, reduce_axis, reduce_max
    from ascendsched.api.check import check
    from ascendsched.lower.schedule_for import schedule_for

    x = placeholder("x", (64, 1024), "float32")
    k = reduce_axis(1024, "k")
    s = compute("s", (64,), lambda i: reduce_max(x[i, k], k))
    q = compute("q", (64, 1024), lambda i, j: x[i, j] / s[i])
    algo = algorithm("quant", [q, s])
    sched = schedule_for(algo)
    assert sched.root().name == "q" and any(d.stage == "q" for d in sched.directives
                                            if hasattr(d, "stage"))
    verdicts = check(algo, cpp=False)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))
    assert {v.check for v in verdicts} >= {"IR execution == numpy (q)", "IR execution == numpy (s)"}
