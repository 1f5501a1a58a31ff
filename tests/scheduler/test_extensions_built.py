"""The optional C extensions are built wherever a C compiler is.

All are optional (setup.py), so a failed build is silent: without the row loops every run is
slower (their NumPy forms decide the same), without the distribution search a kubelet replica
with distribute-cpus-across-numa is (its Python form decides the same), without the arenas Python
keeps its own. Where the compiler Python was built with is present, a missing extension means the
build broke.
"""

from __future__ import annotations

import importlib
import shutil
import sysconfig

import pytest


@pytest.mark.parametrize("module", ["toposched.scheduler._rowloops", "toposched.scheduler._hugearenas",
                                    "toposched.kubelet._numa_distribution"])
def test_the_extension_is_built_where_a_compiler_is(module: str) -> None:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc}): the pure-Python forms run")
    try:
        importlib.import_module(module)
    except ImportError as err:
        pytest.fail(f"the C compiler is here but {module} was not built: {err}")
