"""``explain``'s rows: SGLang's answer unpatched and patched, who decided, and the notes."""

from __future__ import annotations

from dataclasses import dataclass

from sglang_nvfp4_patches.explain.layer import (
    AS_ONE_GPU,
    NOT_SHOWN,
    RUNNER_FLAG,
    LayerOutcome,
    RunnerSearch,
)
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
    # (name, "name is off (reason)") for each patch of this architecture that does not act
    # here: it replaces the patch's own note, which would claim what it does.
    off_notes: tuple[tuple[str, str], ...] = ()
    # The checkpoint's first MoE layer, run patched and as SGLang ships.
    layer: LayerOutcome | None = None
    # False under --no-patches: SGLang's own answer, so no patch note says what it would do
    patches_asked: bool = True
    # The quantization SGLang detects for the MoE checkpoint (None: not MoE, or not quantized)
    moe_quantization: str | None = None
    # The launch is refused before the weights load, where the patches are live: the message
    launch_refused: str | None = None
    # What explain read off an experts count where it reads no MoE layer (moe_count_reading)
    moe_reading: str | None = None
    # Its config builds no MoE layer
    dense: bool = False

    @property
    def moe_layer_runner(self) -> str | None:
        """The runner the layer builds (a refused layer's: the one resolution published)."""
        if self.layer is None:
            return None
        if self.layer.runner is None and self.layer.refused:
            return self.final.moe_runner_backend
        return self.layer.runner

    @property
    def refused(self) -> str | None:
        """Why the layer is refused when it is built, where the patches are live."""
        return self.layer.refused if self.layer is not None else None

    @property
    def final(self) -> ResolvedBackends:
        return self.patched if self.patched is not None else self.unpatched

    @property
    def decided_by(self) -> str:
        """The patches whose declared fields changed SGLang's answer, else user or sglang."""
        if self.launch_refused is not None:
            refusing = [p.name for p in PATCHES if self.launch_refused.startswith(f"[{p.name}]")]
            return ", ".join(refusing) or "sglang-nvfp4-patches"
        if self.patched is not None and self.patched != self.unpatched:
            changed = {
                name
                for name in vars(self.patched)
                if getattr(self.patched, name) != getattr(self.unpatched, name)
            }
            deciders = [p.name for p in PATCHES if p.declares & changed]
            return ", ".join(deciders) or "sglang-nvfp4-patches"
        return "user" if self.attention_backend_given else "sglang"

    @property
    def note(self) -> str:
        """What the row's patches do here (none claims it for a refused layer, or under
        --no-patches), then what happens to the MoE layer."""
        runner = self.moe_layer_runner or self.final.moe_runner_backend
        off = dict(self.off_notes)
        notes = [
            off[patch.name]
            if patch.name in off
            else (
                patch.explain_note(runner, self.moe_quantization)
                if self.patches_asked and not self.refused
                else ""
            )
            for patch in PATCHES
            if patch.concerns(self.architecture)
        ]
        layer = self.layer or LayerOutcome(None)
        about: list[str] = []  # each said after the model's name
        if self.moe_reading:
            about.append(self.moe_reading)
        if self.dense:
            about.append(DENSE)
        if self.launch_refused:
            about.append(f"the launch is refused: {self.launch_refused.rstrip('.')}")
        if self.refused:
            refused = self.refused.rstrip(".") if layer.search is not None else self.refused
            about.append(f"the MoE layer is refused {refused}{_instead(layer.search)}")
        as_shipped = (layer.runner, layer.fails) == (layer.unpatched_runner, layer.fails_unpatched)
        # a refused launch builds no layer: its note says why instead
        fails = bool(layer.fails and self.patches_asked and not self.launch_refused)
        if fails and not as_shipped:
            on = f"on the {layer.runner} MoE runner it" if layer.runner else "the MoE layer"
            about.append(f"{on} fails {layer.fails}")
        if fails and as_shipped:
            about.append(f"with the patches as without, {_built(layer.runner)} fails {layer.fails}")
        elif layer.fails_unpatched:
            who = "without the patches, SGLang" if self.patches_asked else "SGLang as it ships"
            built = _built(layer.unpatched_runner)
            about.append(f"{who} builds {built} and fails {layer.fails_unpatched}")
        if not self.launch_refused:
            who = "without the patches" if self.patches_asked else "as SGLang ships it"
            if layer.unknown_unpatched and layer.unknown != layer.unknown_unpatched:
                about.append(f"{who}, {UNKNOWN_FATE}: {layer.unknown_unpatched}")
            if layer.unknown:
                about.append(f"{UNKNOWN_FATE}: {layer.unknown}")
        notes += [f"{self.model}: {note}" for note in about]
        fate = None
        if layer.layout_fate == AS_ONE_GPU:
            fate = "as on one GPU (each of its dimensions shown across 2 and 4 CPU ranks)"
        elif (layer.layout_fate or "").startswith(NOT_SHOWN):
            fate = f"unknown ({(layer.layout_fate or '').partition(': ')[2]})"
        if fate is not None:
            notes.append(
                f"{self.model} launched with {layer.layout}: the MoE layer's fate is {fate}"
            )
        return one_line("; ".join(note for note in notes if note))

    def as_json(self) -> dict[str, object]:
        layer = self.layer or LayerOutcome(None)
        return {
            "model": self.model,
            "gpu": self.gpu.name,
            "attention_backend": self.final.attention_backend,
            "moe_runner_backend": self.final.moe_runner_backend,
            "decided_by": self.decided_by,
            "unpatched_attention_backend": self.unpatched.attention_backend,
            "unpatched_moe_runner_backend": self.unpatched.moe_runner_backend,
            "patched": self.patched is not None or self.launch_refused is not None,
            "moe_layer_runner": self.moe_layer_runner,
            "moe_layer_refused": self.refused,
            "moe_layer_fails": layer.fails,
            "unpatched_moe_layer_runner": layer.unpatched_runner,
            "unpatched_fails_at_warmup": layer.fails_unpatched,
            "layout": layer.layout,
            "layout_fate": layer.layout_fate,
            "launch_refused": self.launch_refused,
            "dense": self.dense,
            "note": self.note,
        }


def one_line(text: str) -> str:
    """``text`` with every run of whitespace one space (a multi-line message on one line)."""
    return " ".join(text.split())


def _built(runner: str | None) -> str:
    return f"the {runner} MoE runner" if runner else "the MoE layer"


def _instead(search: RunnerSearch | None) -> str:
    """What the runner search showed, after a refusal (nothing where none was run)."""
    if search is None:
        return ""
    if search.serving:
        also = f" (also: {', '.join(search.serving[1:])})" if search.serving[1:] else ""
        return f"; {RUNNER_FLAG} {search.serving[0]} serves it (one forward on CPU){also}"
    unknown = (
        f"{', '.join(search.not_simulated)} reach GPU-only code the CPU simulation cannot run, "
        "the others fail or are refused"
        if search.not_simulated
        else "each fails or is refused"
    )
    return (
        f"; no {RUNNER_FLAG} choice of this SGLang is shown to serve it "
        f"({search.tried} tried: {unknown})"
    )


def _format_pair(before: str | None, after: str | None, with_patches: bool) -> str:
    if not with_patches or before == after:
        return str(before)
    return f"{before} -> {after}"


def _fate(published: str | None, runner: str | None, verdict: str | None) -> str:
    """The MoE layer on one side of a row: ``(serves)``, ``(fails on x)``, ``(refused)``..."""
    if verdict is None:
        return ""
    on = "" if runner in (None, published) else f" on {runner}"
    words = {"serves": "serves", "wrong": "wrong", "fails": "fails", "no kernel": "fails"}
    if verdict == "refused":
        return " (refused)"
    return f" ({words.get(verdict, 'unknown')}{on})"


def _runner_cell(row: ExplainRow, with_patches: bool) -> str:
    """The MoE runner published, unpatched and patched, each with its layer's fate."""
    layer = row.layer
    before = str(row.unpatched.moe_runner_backend)
    after = str(row.final.moe_runner_backend)
    if layer is not None:
        unpatched = layer.unpatched_verdict or ("fails" if layer.fails_unpatched else None)
        patched = layer.verdict or ("fails" if layer.fails else None)
        patched = "refused" if layer.refused else patched
        before += _fate(before, layer.unpatched_runner, unpatched)
        after += _fate(after, row.moe_layer_runner, patched)
    if row.launch_refused is not None:
        after = "refused"
    return _format_pair(before, after, with_patches)


DENSE = (
    "dense (its config places no MoE layer): the patches act on NVFP4 MoE layers only, so "
    "SGLang's choices stand"
)
UNKNOWN_FATE = "the MoE layer's fate is unknown"

# The widest a cell other than the model's may be; a longer one is cut, and whole in a note.
MAX_CELL = 64


def _cell(text: str, column: str, row: ExplainRow, notes: list[str]) -> str:
    text = one_line(text)
    if len(text) <= MAX_CELL:
        return text
    notes.append(f"{row.model} on {row.gpu.name}: {column}: {text}")
    return text[: MAX_CELL - 3] + "..."


def format_table(rows: list[ExplainRow], with_patches: bool) -> str:
    header = (
        "model",
        "GPU",
        "attention (unpatched -> patched)" if with_patches else "attention",
        "MoE runner (unpatched -> patched)" if with_patches else "MoE runner",
        "decided by",
    )
    lines = [header]
    long_cells: list[str] = []
    for row in rows:
        final = row.final
        cells = (
            _format_pair(row.unpatched.attention_backend, final.attention_backend, with_patches),
            _runner_cell(row, with_patches),
            row.decided_by,
        )
        columns = zip(cells, header[2:], strict=True)
        shown = [_cell(cell, column, row, long_cells) for cell, column in columns]
        lines.append((one_line(row.model), row.gpu.name, *shown))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    ]
    text.insert(1, "  ".join("-" * width for width in widths))
    notes = sorted({row.note for row in rows if row.note}) + long_cells
    return "\n".join(text + [""] + [f"note: {note}" for note in notes]).rstrip() + "\n"
