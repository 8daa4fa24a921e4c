"""What makes a fork-server zygote's child stand in for a scheduler process
(``support/forkserver.py``): the modules the zygote imports are ones SGLang's scheduler
module imports before ``run_scheduler_process`` loads plugins, none of ours among them, and
the server itself has not imported them (its children keep a fresh CLI process's order)."""

from __future__ import annotations

from support import SCRIPTS, result_of
from support.forkserver import SCHEDULER_MODULES, server


def test_the_scheduler_module_imports_what_a_zygote_imports() -> None:
    """On the primary release: older releases' scheduler module needs sgl_kernel's CUDA
    library to import (0.5.12 on CPU: no ``libcuda.so.1``)."""
    probe = str(SCRIPTS / "scheduler_imports_probe.py")
    found = result_of(server().start([probe, *SCHEDULER_MODULES]).wait(timeout=300))
    assert found == {"before": [], "after": list(SCHEDULER_MODULES), "ours": []}
