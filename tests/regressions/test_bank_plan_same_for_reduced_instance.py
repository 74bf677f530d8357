"""The bank-aware memory plan must not depend on the problem size: its conflict weights had
counted a core's tile-loop trips and sampled loops the offsets do not move with, so LayerNorm
4185x784 (8 tiles per core) and its reduced instance (71x784, 4 per core) got a Brcb partial
at different UB offsets and `check` failed "full IR == reduced IR" (found by the hypothesis
reduce property test once vec_fma reads made three-source pairs)."""

from ascendsched.algo import library as L
from ascendsched.api.check import check
from ascendsched.lower.pipeline import lower
from ascendsched.schedule.schedule import Schedule


def test_layernorm_plan_is_the_same_at_full_and_reduced_size() -> None:
    s = (Schedule(L.layernorm(4185, 784)).split("y", "i", 11).bind("y", "i_o", cores=48)
         .compute_at("xf", "y", "i_o").compute_inline("mean").compute_at("d", "y", "i_o")
         .compute_inline("var").compute_inline("r").load_once("beta").load_once("gamma")
         .buffer("x", copies=2).buffer("y", copies=2))
    verdicts = {v.check: v for v in check(s, kernel=lower(s), cpp=False, reduce=True)}
    assert verdicts["full IR == reduced IR"].ok, verdicts["full IR == reduced IR"].detail
