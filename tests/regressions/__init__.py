"""Regression tests: one module per fixed bug, named after the bug
(``test_<what_went_wrong>.py``, e.g. ``test_tail_tile_overlaps_full_tile_ub.py``).

Each module's docstring says what broke, how it showed (the error or the wrong output) and which
change fixed it; its tests build the smallest schedule or IR that showed the bug and assert the
fixed behaviour. A test that pins a feature belongs with that feature (``tests/lower``,
``tests/schedule``, ...), not here; a bug found through a feature's test gets its own module
here once the feature test no longer shows it directly.
"""
