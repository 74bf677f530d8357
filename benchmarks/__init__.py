"""The benchmark suites, the report generator (``ascendsched bench``) and standalone scripts."""
