"""A launch's parallel layout and what it does to the MoE runner decision (pure: no SGLang).

A ModelOpt NVFP4 MoE layer is decided on one GPU (:func:`.rule.decide`). A launch across
several GPUs adds tensor (TP), expert (EP), pipeline (PP) and attention data parallelism, and
an all-to-all backend. SGLang builds a layer only where its registry holds a fused function
for (all-to-all backend, runner); the CPU multi-rank check (``verify``) shows which of the
other dimensions give a layer the one-GPU fate: those are the release facts' ``layouts``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

NO_A2A = "none"
COLUMN = "layouts"  # the release facts' column: the dimensions shown, "," between
NOTHING_SHOWN = "-"
# The dimensions a layout leaves one GPU by, as the release facts name them.
TP, EP, PP, ATTN_DP = "tp", "ep", "pp", "attn-dp"
A2A_PREFIX = "a2a-"  # + the backend, e.g. a2a-deepep
DIMENSION_WORDS = {
    TP: "tensor parallelism",
    EP: "expert parallelism",
    PP: "pipeline parallelism",
    ATTN_DP: "attention data parallelism",
}


# The ServerArgs fields that place MoE layers across GPUs: what :meth:`Layout.of` reads.
FIELDS = (
    "tp_size",
    "ep_size",
    "pp_size",
    "attn_dp_size",
    "dp_size",
    "enable_dp_attention",
    "moe_a2a_backend",
    "deepep_mode",
)


def _size(record: Any, name: str) -> int:
    value = getattr(record, name, None)
    return value if isinstance(value, int) and value > 1 else 1


@dataclass(frozen=True)
class Layout:
    """Where one launch's MoE layers run, as SGLang resolved it."""

    tp: int = 1
    ep: int = 1
    pp: int = 1
    attn_dp: int = 1
    a2a: str = NO_A2A
    deepep_mode: str | None = None

    @classmethod
    def of(cls, record: Any) -> Layout:
        """The layout a ``ServerArgs`` (or a view of one) holds."""
        attn_dp = _size(record, "attn_dp_size")
        if attn_dp == 1 and getattr(record, "enable_dp_attention", False):
            attn_dp = _size(record, "dp_size")
        a2a = getattr(record, "moe_a2a_backend", None)
        a2a = str(getattr(a2a, "value", a2a) or NO_A2A)
        mode = getattr(record, "deepep_mode", None)
        return cls(
            tp=_size(record, "tp_size"),
            ep=_size(record, "ep_size"),
            pp=_size(record, "pp_size"),
            attn_dp=attn_dp,
            a2a=a2a,
            deepep_mode=None if mode is None else str(getattr(mode, "value", mode)),
        )

    @property
    def dimensions(self) -> tuple[str, ...]:
        """The ways it leaves one GPU (empty: one GPU, no all-to-all backend)."""
        found = [
            name
            for name, size in ((TP, self.tp), (EP, self.ep), (PP, self.pp), (ATTN_DP, self.attn_dp))
            if size > 1
        ]
        if self.a2a != NO_A2A:
            found.append(A2A_PREFIX + self.a2a)
        return tuple(found)

    @property
    def flags(self) -> str:
        """``--tp-size 8 --ep-size 8 --moe-a2a-backend deepep``: the flags that set it."""
        words = [
            f"--{flag} {size}"
            for flag, size in (
                ("tp-size", self.tp),
                ("ep-size", self.ep),
                ("pp-size", self.pp),
                ("attn-dp-size", self.attn_dp),
            )
            if size > 1
        ]
        if self.a2a != NO_A2A:
            words.append(f"--moe-a2a-backend {self.a2a}")
        return " ".join(words) or "one GPU"


ONE_GPU = Layout()


def shown_cell(dimensions: Iterable[str]) -> str:
    """The ``layouts`` cell of the dimensions the multi-rank check showed."""
    return ",".join(sorted(set(dimensions))) or NOTHING_SHOWN


def shown_of(cell: str | None) -> frozenset[str] | None:
    """The dimensions a ``layouts`` cell holds (``None``: no cell)."""
    if cell is None:
        return None
    return frozenset() if cell == NOTHING_SHOWN else frozenset(cell.split(","))


def shown_layouts() -> frozenset[str] | None:
    """The dimensions the release facts show giving a layer its one-GPU fate, for the SGLang
    this process imported (``None``: no row, or no such cell)."""
    from sglang_nvfp4_patches.release_facts import current_row

    row = current_row()
    return None if row is None else shown_of(row.cell(COLUMN))


@dataclass(frozen=True)
class LayoutFate:
    """What the layout does to a one-GPU decision."""

    failure: str | None = None  # the layer fails when it is built: why
    instead: str | None = None  # with ``failure``: the sentence naming what works
    not_shown: str | None = None  # the decision stands, though not shown for this layout: why


# Asks SGLang's registry: does ``runner`` have a fused function for ``a2a``? (None: cannot ask)
Registered = Callable[[str, str], bool | None]


def fate(
    layout: Layout,
    runner: str | None,
    registered: Registered,
    runners_for: Callable[[str], tuple[str, ...] | None],
    shown: frozenset[str] | None,
) -> LayoutFate:
    """The layout's fate for a layer that builds ``runner`` (``None``: SGLang picks it when
    the layer is built). ``runners_for(a2a)`` lists the runners SGLang registers a fused
    function for there; ``shown`` the dimensions the release facts show."""
    if layout.a2a != NO_A2A:
        others = runners_for(layout.a2a)
        if runner is not None and registered(layout.a2a, runner) is False:
            built = f"the {runner} MoE runner"
        elif runner is None and others == ():
            built = "every MoE runner"
        else:
            built = None
        if built is not None:
            failure = (
                f"{built} has no fused function for --moe-a2a-backend {layout.a2a} in "
                "SGLang's registry"
            )
            return LayoutFate(failure, _instead(layout, others or (), shown))
    missing = [d for d in layout.dimensions if shown is None or d not in shown]
    if not missing:
        return LayoutFate()
    if shown is None:
        return LayoutFate(not_shown="the release facts have no layouts for this SGLang")
    words = [DIMENSION_WORDS.get(d, f"--moe-a2a-backend {d[len(A2A_PREFIX) :]}") for d in missing]
    return LayoutFate(not_shown=f"{' and '.join(words)} not shown on CPU")


def _instead(layout: Layout, others: tuple[str, ...], shown: frozenset[str] | None) -> str:
    plain = Layout(layout.tp, layout.ep, layout.pp, layout.attn_dp)
    proven = shown is not None and all(d in shown for d in plain.dimensions)
    registers = (
        f"SGLang registers one there only for {', '.join(others)} (--moe-runner-backend), "
        "not shown serving on CPU. "
        if others
        else f"SGLang registers no runner's for --moe-a2a-backend {layout.a2a}. "
    )
    where = f"{plain.flags} is" if plain.dimensions else "one GPU is"
    shown_words = "shown serving on CPU" if proven else "not shown on CPU either"
    return f"{registers}Launch it with --moe-a2a-backend none instead ({where} {shown_words})"
