"""ascendsched: a Halide-style scheduling compiler for Huawei Ascend NPUs."""

__version__ = "0.1.0"
