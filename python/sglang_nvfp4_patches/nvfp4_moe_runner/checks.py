"""``nvfp4-moe-runner``'s contract on CPU, on simulated Blackwell GPUs
(:mod:`..simulation.moe_forward`): the evidence equals the release facts' row (or becomes this
machine's); each stand-in launched as operators do gets ``flashinfer_cutlass`` where the
evidence is live, and its layer serves; a launch line no runner serves is refused, naming the
one that does; a given ``--moe-runner-backend`` is resolved as SGLang resolves it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.check_result import CheckFailed, CheckResult, NotApplicable, run_check
from sglang_nvfp4_patches.errors import LaunchRefused
from sglang_nvfp4_patches.evidence_check import agrees_or_kept
from sglang_nvfp4_patches.nvfp4_moe_runner import evidence
from sglang_nvfp4_patches.nvfp4_moe_runner.evidence import (
    cells,
    current_facts,
    gather,
    settings_of,
    stand_ins,
)
from sglang_nvfp4_patches.nvfp4_moe_runner.rule import (
    AUTO,
    CUTLASS,
    EVIDENCE_GPUS,
    NAME,
    NO_QUANTIZATION,
    NVFP4,
    Evidence,
    EvidenceKey,
    EvidenceState,
    launch_name,
    launch_that_works,
)
from sglang_nvfp4_patches.nvfp4_moe_runner.suspension import suspended
from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES
from sglang_nvfp4_patches.simulation.moe_forward import LayerVerdict, run_first_moe_layer
from sglang_nvfp4_patches.simulation.server_args import ServerArgsRejected, quiet_sglang, resolve

# Flags that make the launch the user's: resolution must be SGLang's own.
GIVEN_FLAGS: tuple[dict[str, str], ...] = (
    {"moe_runner_backend": "flashinfer_trtllm"},
    {"moe_runner_backend": CUTLASS},
    {"moe_runner_backend": CUTLASS, "quantization": NVFP4},
)


def _evidence() -> str:
    found = gather()
    states = [fact["state"] for fact in found.values()]
    counts = ", ".join(f"{state} {states.count(state)}" for state in sorted(set(states)))
    summary = f"{len(found)} MoE layer settings x GPU x launch line: {counts}"
    return agrees_or_kept(cells(found), summary)


def _current_facts() -> Evidence:
    record = current_facts()
    if record is None:
        raise CheckFailed("no release facts for this SGLang, so the patch cannot act")
    return record


def _patched_and_own(model_dir: Path, gpu: str, **flags: Any) -> tuple[Any, Any]:
    """The launch resolved with this process's hooks, and by SGLang alone (patch suspended)."""
    patched = resolve(model_dir, GPU_PROFILES[gpu], **flags)
    with suspended():
        return patched, resolve(model_dir, GPU_PROFILES[gpu], **flags)


def _launch(model_dir: Path, gpu: str, quantization: str | None) -> str:
    """One launch as this process's hooks resolve it, against the evidence (where the patch
    acts, the layer built on the published runner must serve)."""
    launch = launch_name(quantization)
    fact = _current_facts()[EvidenceKey(settings_of(model_dir), gpu, launch)]
    state = EvidenceState(fact["state"])
    flags = {} if quantization is None else {"quantization": quantization}
    patched, unpatched = _patched_and_own(model_dir, gpu, **flags)
    published, own = patched.moe_runner_backend, unpatched.moe_runner_backend
    if own not in (None, AUTO):  # SGLang publishes a runner for this launch: it stands
        if published != own:
            raise CheckFailed(f"{gpu}, {launch}: SGLang publishes {own}, yet {published} is")
        return f"{gpu}, {launch}: SGLang's own {own} published"
    if state is EvidenceState.LIVE and published != CUTLASS:
        raise CheckFailed(f"{gpu}, {launch}: the evidence is live, yet {published} is published")
    if state is not EvidenceState.LIVE:
        return f"{gpu}, {launch}: {state.value}, {published} published"
    layer = run_first_moe_layer(model_dir, GPU_PROFILES[gpu], flags)
    if layer is None or layer.verdict is not LayerVerdict.SERVES:
        what = "no layer" if layer is None else f"{layer.verdict.value}: {layer.detail}"
        raise CheckFailed(f"{gpu}, {launch}: published {published}; the layer: {what}")
    return f"{gpu}, {launch}: {published} serves"


def _stand_in_launches(model_dir: Path) -> str:
    """Every operator launch (no flags, the model cards' ``--quantization``) of one stand-in on
    every simulated Blackwell GPU."""
    done = [
        _launch(model_dir, gpu, quantization)
        for gpu in EVIDENCE_GPUS.values()
        for quantization in (None, NVFP4)
    ]
    if not any(line.endswith(" serves") for line in done):
        raise NotApplicable("; ".join(done))
    return "; ".join(done)


def _refusals() -> str:
    """Each launch line no runner serves, where another line does, is refused naming it."""
    record = _current_facts()
    by_settings = {settings_of(model_dir): model_dir for model_dir in stand_ins().values()}
    refused: list[str] = []
    for key, fact in record.items():
        instead = launch_that_works(record, key)
        if fact["state"] != EvidenceState.NO_REMEDY.value or instead is None:
            continue
        settings, gpu, launch = key
        flags = {} if launch == NO_QUANTIZATION else {"quantization": launch.split()[-1]}
        try:
            resolve(by_settings[settings], GPU_PROFILES[gpu], **flags)
        except ServerArgsRejected as error:
            if not isinstance(error.__cause__, LaunchRefused) or instead not in str(error):
                raise CheckFailed(f"{key}: refused, but not naming {instead}: {error}") from error
            refused.append(str(key))
            continue
        raise CheckFailed(f"{key}: fails on every runner, yet the launch was not refused")
    if not refused:
        raise NotApplicable("no launch line fails on every runner where another serves")
    return f"refused, naming the launch line that works: {'; '.join(refused)}"


def _given_flags_honoured() -> str:
    checked = []
    for stand_in, model_dir in stand_ins().items():
        for gpu in ("sm100", "sm120"):
            for flags in GIVEN_FLAGS:
                patched, unpatched = _patched_and_own(model_dir, gpu, **flags)
                if patched != unpatched:
                    raise CheckFailed(f"{stand_in} with {flags}: {patched} not {unpatched}")
        checked.append(stand_in)
    return f"{len(GIVEN_FLAGS)} flag sets on sm100 and sm120 resolved as SGLang resolves them: " + (
        ", ".join(checked)
    )


def _layouts() -> str:
    """The release facts' ``layouts`` cell, derived again across CPU ranks."""
    found, lines = evidence.gather_layouts()
    return agrees_or_kept(found, "; ".join(lines))


def run_checks() -> list[CheckResult]:
    """Every check (call in a process where SGLang loaded the plugin)."""
    with quiet_sglang():
        results = [run_check(NAME, "evidence (SGLang as it ships)", _evidence)]
        for stand_in, model_dir in stand_ins().items():
            results.append(
                run_check(
                    NAME,
                    f"{stand_in}, no flags and --quantization {NVFP4}, every Blackwell GPU",
                    lambda model_dir=model_dir: _stand_in_launches(model_dir),
                )
            )
        results.append(run_check(NAME, "launch lines no runner serves", _refusals))
        results.append(run_check(NAME, "given --moe-runner-backend", _given_flags_honoured))
        results.append(run_check(NAME, "layouts across 2 and 4 CPU ranks", _layouts))
    return results
