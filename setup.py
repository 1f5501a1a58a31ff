"""The compiled modules: the scheduler plugins' row loops (docs/scheduler/design.md, "Compiled row
loops"), the huge-page arenas of the scheduler's Python heap (toposched.scheduler.heap), and the
kubelet model's search for distribute-cpus-across-numa (toposched.kubelet.numa_distribution).

Everything else is in pyproject.toml. Every extension is optional: without a C compiler the install
still succeeds, the scheduler runs the loops' NumPy forms and the kubelet model its Python search,
which decide the same, and Python keeps its own arenas.
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
        Extension("toposched.kubelet._numa_distribution", sources=["src/toposched/kubelet/_numa_distribution.c"],
                  # The balance of a split is a float: the Python form's operations in its order, none fused.
                  extra_compile_args=["-O2", "-ffp-contract=off", "-fno-fast-math"], optional=True),
        Extension("toposched.scheduler._hugearenas", sources=["src/toposched/scheduler/_hugearenas.c"],
                  extra_compile_args=["-O2"], optional=True),
    ]
)
