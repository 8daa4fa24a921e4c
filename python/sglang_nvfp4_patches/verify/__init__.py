"""``sglang-nvfp4-patches verify``: each patch's contract, checked on CPU against the
installed SGLang (not the test suite: no pytest, no GPU, no network, no model download).

* :mod:`.result`: a check's outcome (pure);
* each patch's checks live in its package (its declaration's ``verify_checks``), run inside a
  process where SGLang loaded the plugin with every patch switched on, through the CPU
  simulation the tests use (:mod:`sglang_nvfp4_patches.simulation`);
* :mod:`.child`: one such process per patch (fresh interpreter,
  ``SGLANG_NVFP4_PATCHES_UNTESTED=apply``, nothing disabled or forced), so ``verify`` also
  answers on an untested release;
* :mod:`.run`: the command: every patch at once, one line per check, ``--json``, exit 0 only
  when every check holds.
"""
