"""benchmarks/row_blocks.py: the three ways to run a GEMM + row softmax it compares."""

from ascendsched.api.check import check
from ascendsched.benchmarks.row_blocks import softmax32, us, whole_rows
from ascendsched.lower.schedule_for import schedule_for


def test_the_whole_row_tiling_holds_whole_rows_and_models_slower_than_the_default():
    from ascendsched.algo import library as L

    w = whole_rows(1024, 1024, 128)
    assert w is not None and not w.plan.row_blocks and w.plan.tiling.tn == 1024
    d = schedule_for(L.gemm_softmax(1024, 1024, 128))
    assert d.plan.row_blocks and us(d) < us(w)
    assert whole_rows(256, 4096, 128) is None  # 16 rows of 4096 float32 overflow L0C


def test_the_second_kernel_is_the_float32_softmax_of_the_scores():
    s = softmax32(40, 300)
    assert [t.dtype.name for t in s.inputs] == ["float32"]
    assert s.outputs[0].dtype.name == "float16"
    verdicts = check(schedule_for(s), cpp=False)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))
