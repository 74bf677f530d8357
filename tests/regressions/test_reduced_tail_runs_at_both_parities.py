"""A reduced instance must run each tile version at the iteration parities the full kernel
runs it at: LayerNorm 77 x 2000 in fused 2 x 400 tiles on 16 cores runs its row-tail tiles at
iterations 11 and 12 of the persistent loop, its former reduced instance (7 x 2000 on 7
cores) at iteration 2 alone, where the tail's x_ub flag could share event id 1 with the full
tiles' copy 0, and `check` failed "full IR == reduced IR" (event id: full 3, reduced 1; found
by the tuner-points property test at the dev profile)."""

from ascendsched.algo import library as L
from ascendsched.api.check import check
from ascendsched.schedule.reduce import reduce_instance
from ascendsched.schedule.schedule import Schedule


def test_layernorm_row_tail_keeps_both_iteration_parities_when_reduced() -> None:
    s = (Schedule(L.layernorm(77, 2000)).split("y", "i", 2).split("y", "j", 400)
         .fuse("y", "i_o", "j_o", fused="i_o_j_o").bind("y", "i_o_j_o", cores=16)
         .compute_at("xf", "y", "i_o_j_o").compute_at("mean", "y", "i_o_j_o")
         .compute_at("d", "y", "i_o_j_o").compute_inline("var").compute_at("r", "y", "i_o_j_o")
         .load_once("beta").buffer("x", copies=2))
    red = reduce_instance(s)
    assert not red.is_full and str(red).endswith("reduced y[9, 2000] on 6 cores")
    verdicts = {v.check: v for v in check(s, cpp=False, reduce=True)}
    assert verdicts["full IR == reduced IR"].ok, verdicts["full IR == reduced IR"].detail
