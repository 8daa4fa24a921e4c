"""An edited copy of the SGLang under test: the same code and version string with one file,
``trtllm_mha_backend.py``, rewritten. The edits are how a nightly or vendor build could look:

* :func:`revert_scale_handoff`: the May-June 2026 bug window, sglang#28144's FP8 KV-cache
  V-scale handoff reverted (``bmm2_scale = 1.0`` again);
* :func:`a_line_added`: one comment line more, the same code under other sources.

:func:`make_bug_window_copy` builds the copy: real directories only along the path to the
edited file, one symbolic link for every other file or directory (a few dozen links, made in
milliseconds); put it first on ``PYTHONPATH`` and the interpreter imports it, dist-info
included. Run as a script, ``edited_sglang.py COPY_DIR ARGS...`` is
``python -m sglang_nvfp4_patches ARGS`` in a process whose SGLang keeps its TRT-LLM MHA
backend in the copy: the copy's ``sglang`` goes first on ``sglang.__path__``, so
``sglang.srt.__path__`` (a namespace path computed from it) starts with the copy's ``srt`` as
it would with the copy first on ``PYTHONPATH``; submodules not yet imported then load from the
copy. This lets a child of the fork server (SGLang already imported) stand in for a fresh
interpreter with the copy on ``PYTHONPATH``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import runpy
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

BACKEND = Path("srt", "layers", "attention", "trtllm_mha_backend.py")
# sglang#28144: `bmm1_scale, bmm2_scale = self._get_bmm_scales(layer, q_scale)`; later
# releases also compute `bmm2_scale = v_scale` on their NVFP4-KV path.
_HELPER_CALL_UNPACKED = re.compile(
    r"^(?P<indent>[ \t]*)bmm1_scale, bmm2_scale = (?P<call>self\._get_bmm_scales\(.*\))[ \t]*$",
    re.MULTILINE,
)
_V_SCALE = re.compile(r"^(?P<indent>[ \t]*)bmm2_scale = v_scale[ \t]*$", re.MULTILINE)


def revert_scale_handoff(source: str) -> tuple[str, int]:
    """The backend source with every V-scale handoff replaced by the constant 1.0."""
    source, helper_calls = _HELPER_CALL_UNPACKED.subn(
        r"\g<indent>bmm1_scale = \g<call>[0]\n\g<indent>bmm2_scale = 1.0", source
    )
    source, v_scales = _V_SCALE.subn(r"\g<indent>bmm2_scale = 1.0", source)
    return source, helper_calls + v_scales


def installed_package_dir() -> Path:
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("SGLang is not importable")
    return Path(next(iter(spec.submodule_search_locations)))


Edit = Callable[[str], tuple[str, int]]


def _link_all_but(source: Path, target: Path, paths: list[Path]) -> None:
    """Mirror ``source`` in ``target`` with one symbolic link per entry, except the
    directories along ``paths``, which are made for real so their last files can be replaced."""
    target.mkdir(parents=True)
    for entry in source.iterdir():
        inside = [
            Path(*p.parts[1:]) for p in paths if len(p.parts) > 1 and p.parts[0] == entry.name
        ]
        if inside:
            _link_all_but(entry, target / entry.name, inside)
        else:
            (target / entry.name).symlink_to(entry)


def _copy_dist_info(dist_info: Path, target: Path, version: str | None) -> None:
    """The dist-info, linked; under another version, its METADATA says that version."""
    if version is None:
        shutil.copytree(dist_info, target / dist_info.name, copy_function=os.symlink)
        return
    renamed = target / f"sglang-{version}.dist-info"
    shutil.copytree(dist_info, renamed, copy_function=os.symlink)
    metadata = renamed / "METADATA"
    text = metadata.read_text(encoding="utf-8")
    metadata.unlink()
    metadata.write_text(re.sub(r"(?m)^Version: .*$", f"Version: {version}", text, count=1))


def make_edited_copy(
    target: Path, edits: Mapping[Path, Edit] | None = None, version: str | None = None
) -> Path:
    """Build a copy of the installed SGLang under ``target`` and return the directory to put
    on PYTHONPATH: each file of ``edits`` (a path inside the package) rewritten by its edit,
    and, with ``version``, the dist-info saying that version (a simulated next release).

    Each edit returns the new source and how many places it changed (none is an error: the
    edit no longer fits this release)."""
    edits = dict(edits or {})
    package = installed_package_dir()
    installed = importlib.metadata.version("sglang")
    (dist_info,) = package.parent.glob(f"sglang-{installed}.dist-info")
    _link_all_but(package, target / "sglang", list(edits))
    _copy_dist_info(dist_info, target, version)
    for path, edit in edits.items():
        edited = target / "sglang" / path
        changed, count = edit((package / path).read_text(encoding="utf-8"))
        if count == 0:
            raise RuntimeError(f"{edit.__name__} found nothing to edit in {package / path}")
        edited.unlink()
        edited.write_text(changed, encoding="utf-8")
    return target


def make_bug_window_copy(target: Path, edit: Edit = revert_scale_handoff) -> Path:
    """A copy whose TRT-LLM MHA backend is rewritten by ``edit`` (the bug window by default)."""
    return make_edited_copy(target, {BACKEND: edit})


_FIRST_DEFINITION = re.compile(r"^(?=@|class |def )", re.M)  # after the imports


# Simulated next releases: 0.5.23's code (or the installed release's) with one change each.
NEXT_RELEASE = "0.5.24.dev0"
# A source the release facts fingerprint (``release_facts.SOURCES``).
MOE_TOPK = Path("srt", "layers", "moe", "topk.py")


def a_line_added(source: str) -> tuple[str, int]:
    """One comment line more: other sources to the records, the same code to Python."""
    return f"{source}\n# a line this build adds\n", 1


# The next release changes sources the release facts fingerprint; 0.5.23's sources unchanged under
# its version would be 0.5.23 to the release gate (``test_tested_release_builds.py``).
NEXT_RELEASE_EDITS = {MOE_TOPK: a_line_added}
MODELOPT = Path("srt", "layers", "quantization", "modelopt_quant.py")
CUTLASS_RUNNER = Path("srt", "layers", "moe", "moe_runner", "flashinfer_cutlass.py")
RUNNER_BASE = Path("srt", "layers", "moe", "moe_runner", "base.py")
_MODELOPT_ASSERT = re.compile(
    r"^[ \t]*assert not self\.moe_runner_config\.apply_router_weight_on_input, \([^)]*\)\n",
    re.M,
)
_PRESCALE_CALL = re.compile(
    r"^(?P<indent>[ \t]*)dispatch_output = _prescale_router_weight_on_input\([^)]*\)[ \t]*$", re.M
)
_UNIT_SCALES_HANDED = re.compile(r"topk_output=topk_output\._replace\(topk_weights=unit_scales\)")


COMPRESSED_TENSORS = Path(
    "srt",
    "layers",
    "quantization",
    "compressed_tensors",
    "schemes",
    "compressed_tensors_w4a4_nvfp4_moe.py",
)
# 0.5.15.post1-0.5.23: `assert not self.moe_runner_config.apply_router_weight_on_input, (msg)`
_FLAG_ASSERT = re.compile(
    r"^(?P<indent>[ \t]*)assert not self\.moe_runner_config\.apply_router_weight_on_input, "
    r"\((?P<message>[^)]*)\)\n",
    re.M,
)
_MODELOPT_CLASS = re.compile(r"^class ModelOptNvFp4FusedMoEMethod\(.*\):\n", re.M)


def _rejection_rewritten(source: str, body: str) -> tuple[str, int]:
    """Each flag assert replaced by ``body`` (``{i}``: its indent, ``{m}``: its message)."""
    return _FLAG_ASSERT.subn(
        lambda found: body.format(i=found["indent"], m=found["message"].strip()), source
    )


_STANDARD_FUSED_FUNC = re.compile(
    r"^def fused_experts_none_to_flashinfer_cutlass\([^)]*\)[^:]*:\n", re.M
)


def runner_rejects_again(source: str) -> tuple[str, int]:
    """The runner keeps its pre-scale, and its standard fused function rejects the flag first."""
    return _STANDARD_FUSED_FUNC.subn(
        "\\g<0>    if runner_config.apply_router_weight_on_input:\n"
        '        raise NotImplementedError("apply_router_weight_on_input: not here")\n',
        source,
    )


def runner_prescale_renamed(source: str) -> tuple[str, int]:
    """The runner still pre-scales, under a name this plugin does not know."""
    return re.subn(r"\b_prescale_router_weight_on_input\b", "_weight_input_by_router", source)


def modelopt_assert_removed(source: str) -> tuple[str, int]:
    """Upstream drops ModelOpt's rejection of the flag."""
    return _MODELOPT_ASSERT.subn("", source)


def prescale_gone(source: str) -> tuple[str, int]:
    """The runner no longer pre-scales (its helper renamed away, the call dropped)."""
    source, calls = _PRESCALE_CALL.subn(r"\g<indent>pass", source)
    source, defs = re.subn(r"\bdef _prescale_router_weight_on_input\(", "def _gone(", source)
    return source, calls * defs


def registry_renamed(source: str) -> tuple[str, int]:
    """SGLang's fused-function registry keeps its functions under another name."""
    return re.subn(r"\b_fused_funcs\b", "_fused_ops", source)


def prescale_keeps_router_weights(source: str) -> tuple[str, int]:
    """The runner pre-scales the input and still hands the kernel the router weights as its
    final scales (vllm#43694's double weighting)."""
    return _UNIT_SCALES_HANDED.subn(
        "topk_output=topk_output._replace(topk_weights=topk_weights)", source
    )


_NVFP4_AUTO_TO_TRTLLM = re.compile(
    r"^(?P<indent>[ \t]*)moe_runner_backend = MoeRunnerBackend\.FLASHINFER_TRTLLM[ \t]*$", re.M
)
_NVFP4_CUTLASS_FLAG = re.compile(
    r"^(?P<indent>[ \t]*)return get_moe_runner_backend\(\)\.is_flashinfer_cutlass\(\)[ \t]*$",
    re.M,
)


def _in_nvfp4_method(source: str, pattern: re.Pattern[str], replacement: str) -> tuple[str, int]:
    """``pattern`` replaced once, inside ``ModelOptNvFp4FusedMoEMethod`` only."""
    start = _MODELOPT_CLASS.search(source)
    if start is None:
        return source, 0
    head, body = source[: start.end()], source[start.end() :]
    body, count = pattern.subn(replacement, body, count=1)
    return head + body, count


def moe_runner_fix_39807(source: str) -> tuple[str, int]:
    """sglang#39807's two changes to the ModelOpt NVFP4 MoE method: with the published runner
    left at auto, ``create_moe_runner`` picks FlashInfer CUTLASS on SM110/SM12x (TRT-LLM
    elsewhere, as before), and ``enable_flashinfer_cutlass_moe`` reads the runner it resolved,
    so the weights are prepared for the runner the layer runs."""
    source, picks = _in_nvfp4_method(
        source,
        _NVFP4_AUTO_TO_TRTLLM,
        "\\g<indent>moe_runner_backend = (\n"
        "\\g<indent>    MoeRunnerBackend.FLASHINFER_CUTLASS\n"
        "\\g<indent>    if get_platform().is_sm120 or get_platform().is_sm110\n"
        "\\g<indent>    else MoeRunnerBackend.FLASHINFER_TRTLLM\n"
        "\\g<indent>)",
    )
    source, reads = _in_nvfp4_method(
        source,
        _NVFP4_CUTLASS_FLAG,
        '\\g<indent>return getattr(self, "_moe_runner_backend", get_moe_runner_backend())'
        ".is_flashinfer_cutlass()",
    )
    return source, picks * reads


def put_first(copy: str) -> None:
    """The copy's SGLang first: its dist-info on ``sys.path`` right after the script's own
    folder, as ``PYTHONPATH`` puts it (the version it says), its package first on
    ``sglang.__path__``; once (a fork server's zygote may have done it)."""
    import sglang

    if copy not in sys.path:
        sys.path.insert(1, copy)
    package = str(Path(copy) / "sglang")
    if sglang.__path__[0] != package:
        sglang.__path__.insert(0, package)


def run_cli_on_copy(copy: str, arguments: list[str]) -> None:
    """``python -m sglang_nvfp4_patches ARGUMENTS`` with the copy's SGLang first."""
    put_first(copy)
    sys.argv = ["sglang_nvfp4_patches", *arguments]
    runpy.run_module("sglang_nvfp4_patches", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    run_cli_on_copy(sys.argv[1], sys.argv[2:])


# Round 3 (issue 37): rewrites whose rejection this plugin's reader does not see, or sees
# where it does not stop the layer. Each is a plausible next-release refactor of 0.5.23.
def rejection_in_a_match_case(source: str) -> tuple[str, int]:
    """``match`` on the runner backend; the check sits inside the CUTLASS case."""
    return _rejection_rewritten(
        source,
        "{i}match moe_runner_backend:\n"
        "{i}    case MoeRunnerBackend.FLASHINFER_CUTLASS:\n"
        "{i}        if self.moe_runner_config.apply_router_weight_on_input:\n"
        "{i}            raise NotImplementedError({m})\n"
        "{i}    case _:\n"
        "{i}        pass\n",
    )


def rejection_as_a_config_method(source: str) -> tuple[str, int]:
    """The method asks the config to check itself (a method of ``MoeRunnerConfig``)."""
    return _rejection_rewritten(
        source, "{i}self.moe_runner_config.check_router_weight_on_input()\n"
    )


def rejection_through_a_config_property(source: str) -> tuple[str, int]:
    """The flag read through a property of ``MoeRunnerConfig`` under another name."""
    return _rejection_rewritten(
        source,
        "{i}if self.moe_runner_config.scales_input_by_router_weight:\n"
        "{i}    raise NotImplementedError({m})\n",
    )


_RUNNER_CONFIG_FLAG = re.compile(r"^    apply_router_weight_on_input: bool = False\n", re.M)
_DATACLASS_END = re.compile(r"^(?=\n\nclass |\n\n@)", re.M)


def config_checks_itself(source: str) -> tuple[str, int]:
    """``MoeRunnerConfig`` gains the check as a method, and the flag as a property under
    another name (both placed after the dataclass's fields)."""
    if not _RUNNER_CONFIG_FLAG.search(source):
        return source, 0
    start = source.index("class MoeRunnerConfig")
    end = _DATACLASS_END.search(source, start)
    if end is None:
        return source, 0
    members = (
        "\n    @property\n"
        "    def scales_input_by_router_weight(self) -> bool:\n"
        "        return self.apply_router_weight_on_input\n\n"
        "    def check_router_weight_on_input(self) -> None:\n"
        "        if self.apply_router_weight_on_input:\n"
        "            raise NotImplementedError(\n"
        '                "apply_router_weight_on_input is not supported for Flashinfer"\n'
        "            )\n"
    )
    return source[: end.start()] + members + source[end.start() :], 1


_NVFP4_APPLY = re.compile(r"^    def apply\(\n", re.M)
DECORATOR = """def _rejects_router_weight_on_input(apply):
    import functools

    @functools.wraps(apply)
    def checked(self, layer, dispatch_output):
        if self.moe_runner_config.apply_router_weight_on_input:
            raise NotImplementedError(
                "apply_router_weight_on_input is not supported for Flashinfer"
            )
        return apply(self, layer, dispatch_output)

    return checked


"""


def rejection_in_a_decorator(source: str) -> tuple[str, int]:
    """The check moves into a decorator of ModelOpt NVFP4's ``apply``."""
    source, dropped = _MODELOPT_ASSERT.subn("", source)
    source, decorated = _in_nvfp4_method(
        source, _NVFP4_APPLY, "    @_rejects_router_weight_on_input\n    def apply(\n"
    )
    source, _ = _FIRST_DEFINITION.subn(DECORATOR, source, count=1)
    return source, dropped * decorated


_CT_CLASS = re.compile(r"^class CompressedTensorsW4A4Nvfp4MoE\(.*\):\n", re.M)


def rejection_by_a_predicate(source: str) -> tuple[str, int]:
    """A predicate method of the class decides the ``raise``."""
    source, calls = _rejection_rewritten(
        source,
        "{i}if not self._router_weight_supported():\n{i}    raise NotImplementedError({m})\n",
    )
    predicate = (
        "\\g<0>    def _router_weight_supported(self):\n"
        "        return not self.moe_runner_config.apply_router_weight_on_input\n\n"
    )
    source, defs = _CT_CLASS.subn(predicate, source, count=1)
    return source, calls * defs


POLICY = """class _RouterWeightPolicy:
    @staticmethod
    def check(apply_router_weight_on_input):
        if apply_router_weight_on_input:
            raise NotImplementedError(
                "apply_router_weight_on_input is not supported for Flashinfer"
            )


"""


def rejection_in_another_class(source: str) -> tuple[str, int]:
    """The flag is handed to a static method of another class, which raises."""
    source, calls = _rejection_rewritten(
        source,
        "{i}_RouterWeightPolicy.check(self.moe_runner_config.apply_router_weight_on_input)\n",
    )
    source, _ = _FIRST_DEFINITION.subn(POLICY, source, count=1)
    return source, calls


_NVFP4_PROCESS = re.compile(
    r"^    def process_weights_after_loading\(self, layer: torch\.nn\.Module\) -> None:\n"
    r'(?:        """[^\n]*"""\n)?',
    re.M,
)


def rejection_at_load(source: str) -> tuple[str, int]:
    """ModelOpt NVFP4's check moves from ``apply`` to ``process_weights_after_loading``,
    reading the layer's config: the layer fails at load, after the lift."""
    source, dropped = _MODELOPT_ASSERT.subn("", source)
    source, moved = _in_nvfp4_method(
        source,
        _NVFP4_PROCESS,
        "\\g<0>        if layer.moe_runner_config.apply_router_weight_on_input:\n"
        "            raise NotImplementedError(\n"
        '                "apply_router_weight_on_input is not supported for Flashinfer"\n'
        "            )\n",
    )
    return source, dropped * moved


def runner_stops_prescaling(source: str) -> tuple[str, int]:
    """The runner's fused functions no longer call their pre-scale (the helper stays, and
    works when called alone)."""
    return _PRESCALE_CALL.subn(r"\g<indent>pass", source)


def modelopt_prescales_itself(source: str) -> tuple[str, int]:
    """ModelOpt NVFP4 drops its rejection and pre-scales the input itself, with the runner's
    helper."""
    return _rejection_rewritten(
        source,
        "{i}from sglang.srt.layers.moe.moe_runner.flashinfer_cutlass import (\n"
        "{i}    _prescale_router_weight_on_input,\n"
        "{i})\n\n"
        "{i}dispatch_output = _prescale_router_weight_on_input(\n"
        "{i}    dispatch_output, self.moe_runner_config\n"
        "{i})\n",
    )
