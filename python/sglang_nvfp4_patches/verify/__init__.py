"""``sglang-nvfp4-patches verify``: each patch's contract, checked on CPU against the
installed SGLang (not the test suite: no pytest, no GPU, no network, no model download).

* a check's outcome: :mod:`sglang_nvfp4_patches.check_result` (pure), below this command and
  the patches (their checks return it), as :mod:`sglang_nvfp4_patches.evidence_check` is;
* each patch's checks live in its package (its declaration's ``verify_checks``), run inside a
  process where SGLang loaded the plugin with every patch switched on, through the CPU
  simulation the tests use (:mod:`sglang_nvfp4_patches.simulation`);
* :mod:`.child`: one such process per patch (fresh interpreter,
  ``SGLANG_NVFP4_PATCHES_UNTESTED=apply``, nothing disabled or forced), so ``verify`` also
  answers on an untested release;
* :mod:`.run`: the command: every patch at once, one line per check, ``--json``, exit 0 only
  when every check holds.
"""
