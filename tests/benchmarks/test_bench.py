"""``ascendsched bench``: a suite tuned end to end into a Markdown report with its pictures."""

import re

import pytest

from ascendsched.api.cli import main


@pytest.mark.slow
def test_bench_writes_a_report_reproducible_from_the_cache(tmp_path, capsys):
    out = tmp_path / "rep"
    argv = ["bench", "--suite", "tiny", "--out", str(out), "--budget", "3", "--jobs", "1",
            "--no-progress"]
    assert main(argv) == 0
    md = (out / "report.md").read_text()
    assert "**All times, ratios, utilisations and speed-ups below are modelled**" in md
    for png in re.findall(r"\]\((img/[^)]+\.png)\)", md):
        assert (out / png).stat().st_size > 1000, png
    assert md.count("![timeline") == 2  # one timeline per kernel
    assert "| add 65536 |" in md and "| GEMM 256^3 fp16 |" in md
    assert "bishengir" in md and "| softmax |" in md
    table = [ln for ln in md.splitlines() if ln.startswith("| add 65536 |")][0]
    # same command again: every figure comes from the cache, the table is unchanged
    capsys.readouterr()
    assert main(argv) == 0
    again = (out / "report.md").read_text()
    assert table.rsplit("|", 3)[0] == [ln for ln in again.splitlines()
                                       if ln.startswith("| add 65536 |")][0].rsplit("|", 3)[0]
    assert re.search(r"\| tpe \| (\d+) \(\1\) \|", again)  # all points from the cache
