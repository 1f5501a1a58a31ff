"""The compiled modules: the scheduler plugins' row loops (docs/scheduler/design.md, "Compiled row
loops") and the huge-page arenas of the scheduler's Python heap (toposched.scheduler.heap).

Everything else is in pyproject.toml. Both extensions are optional: without a C compiler the install
still succeeds, the scheduler runs the loops' NumPy forms, which decide the same, and Python keeps
its own arenas.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "toposched.scheduler._rowloops",
            sources=["src/toposched/scheduler/_rowloops.c"],
            # Bit-for-bit the NumPy forms' floating point: no fused multiply-add, no reassociation.
            # -fno-trapping-math changes no result (only whether an operation may raise a floating-point
            # exception flag), and lets GCC vectorise loops that divide.
            extra_compile_args=["-O3", "-ffp-contract=off", "-fno-fast-math", "-fno-trapping-math"],
            optional=True,
        ),
        Extension("toposched.scheduler._hugearenas", sources=["src/toposched/scheduler/_hugearenas.c"],
                  extra_compile_args=["-O2"], optional=True),
    ]
)
