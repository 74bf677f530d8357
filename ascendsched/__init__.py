"""ascendsched: a Halide-style scheduling compiler for Huawei Ascend NPUs.

This folder holds the two ends of the package. The low layer, imported by every stage:
``errors`` (the error and warning classes) and ``dtypes``. The top, ``api/``, which imports
every stage: ``compile``, ``check`` (the CPU verification ladder) and the ``ascendsched``
command. The stages themselves (``ascendsched.algo`` ... ``ascendsched.autotune``) live in
the repository's top-level folders (pyproject.toml's package-dir).
"""

__version__ = "0.1.0"
