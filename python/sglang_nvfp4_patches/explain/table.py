"""``explain``'s rows: SGLang's answer unpatched and patched, who decided, and the notes."""

from __future__ import annotations

from dataclasses import dataclass

from sglang_nvfp4_patches.patches import PATCHES
from sglang_nvfp4_patches.simulation.gpus import GpuProfile
from sglang_nvfp4_patches.simulation.server_args import ResolvedBackends


@dataclass(frozen=True)
class ExplainRow:
    model: str
    gpu: GpuProfile
    unpatched: ResolvedBackends
    patched: ResolvedBackends | None
    architecture: str | None
    attention_backend_given: bool = False
    # (name, "name is off (reason)") for each patch that concerns this architecture and does
    # not act in this process (disabled, or not patched on an untested release): its note
    # replaces the patch's own, which would claim what it does where it acts.
    off_notes: tuple[tuple[str, str], ...] = ()
    # What SGLang's compressed-tensors scheme builds for the MoE layer (resolution says auto).
    moe_layer_runner: str | None = None

    @property
    def final(self) -> ResolvedBackends:
        return self.patched if self.patched is not None else self.unpatched

    @property
    def decided_by(self) -> str:
        """The patch whose declaration changed SGLang's answer (the one that concerns this
        architecture), ``user`` when the user's ``--attention-backend`` decided, else
        ``sglang``."""
        if self.patched is not None and self.patched != self.unpatched:
            concerned = [p.name for p in PATCHES if self.architecture in p.architectures]
            return concerned[0] if concerned else "sglang-nvfp4-patches"
        return "user" if self.attention_backend_given else "sglang"

    @property
    def note(self) -> str:
        runner = self.moe_layer_runner or self.final.moe_runner_backend
        off = dict(self.off_notes)
        notes = [
            off[patch.name] if patch.name in off else patch.explain_note(runner)
            for patch in PATCHES
            if self.architecture in patch.architectures
        ]
        return "; ".join(note for note in notes if note)

    def as_json(self) -> dict[str, object]:
        return {
            "model": self.model,
            "gpu": self.gpu.name,
            "attention_backend": self.final.attention_backend,
            "moe_runner_backend": self.final.moe_runner_backend,
            "decided_by": self.decided_by,
            "unpatched_attention_backend": self.unpatched.attention_backend,
            "unpatched_moe_runner_backend": self.unpatched.moe_runner_backend,
            "patched": self.patched is not None,
            "moe_layer_runner": self.moe_layer_runner,
            "note": self.note,
        }


def _format_pair(before: str | None, after: str | None, with_patches: bool) -> str:
    if not with_patches or before == after:
        return str(before)
    return f"{before} -> {after}"


def format_table(rows: list[ExplainRow], with_patches: bool) -> str:
    header = (
        "model",
        "GPU",
        "attention (unpatched -> patched)" if with_patches else "attention",
        "MoE runner (unpatched -> patched)" if with_patches else "MoE runner",
        "decided by",
    )
    lines = [header]
    for row in rows:
        final = row.final
        lines.append(
            (
                row.model,
                row.gpu.name,
                _format_pair(
                    row.unpatched.attention_backend, final.attention_backend, with_patches
                ),
                _format_pair(
                    row.unpatched.moe_runner_backend, final.moe_runner_backend, with_patches
                )
                + (f" (layer: {row.moe_layer_runner})" if row.moe_layer_runner else ""),
                row.decided_by,
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    ]
    text.insert(1, "  ".join("-" * width for width in widths))
    notes = sorted({row.note for row in rows if row.note})
    return "\n".join(text + [""] + [f"note: {note}" for note in notes]).rstrip() + "\n"
