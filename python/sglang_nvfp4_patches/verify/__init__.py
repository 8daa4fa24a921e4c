"""``sglang-nvfp4-patches verify``: each patch's contract, checked on CPU against the installed
SGLang through the CPU simulation (:mod:`sglang_nvfp4_patches.simulation`); no pytest, GPU,
network or download. :mod:`.child` runs one patch's checks (its declaration's
``verify_checks``) in a fresh process with every patch on; :mod:`.run` is the command.
"""
