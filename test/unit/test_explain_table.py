"""``explain``'s table stays a table: one line per row and per note, no cell wider than
``MAX_CELL`` (a longer value goes whole to a note), and a layer refused for top-k says what the
runner search showed (rows built here; no SGLang import)."""

from __future__ import annotations

import pytest

from sglang_nvfp4_patches.explain.layer import LayerOutcome, RunnerSearch
from sglang_nvfp4_patches.explain.table import MAX_CELL, ExplainRow, format_table
from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES
from sglang_nvfp4_patches.simulation.server_args import ResolvedBackends

PYDANTIC = (
    "when it is built: ValidationError: 1 validation error for QuantizationArgs\n"
    "num_bits\n  Input should be a valid integer [type=int_parsing, input_value='x']\n"
    "    For further information visit https://errors.pydantic.dev/2.11/v/int_parsing"
)
TOP_K = "when it is built: top-k must be 1 on this runner; use another MoE runner backend."


def _backends(attention: str = "triton", moe: str = "auto") -> ResolvedBackends:
    return ResolvedBackends(attention, None, None, moe, "modelopt_fp4")


def _row(gpu: str = "sm120", layer: LayerOutcome | None = None, **backends: str) -> ExplainRow:
    resolved = _backends(**backends)
    return ExplainRow("M", GPU_PROFILES[gpu], resolved, resolved, None, layer=layer)


def _table_and_notes(*rows: ExplainRow) -> tuple[list[str], list[str]]:
    text = format_table(list(rows), with_patches=True)
    table, _, notes = text.partition("\n\n")
    return table.splitlines(), notes.splitlines()


def test_a_long_value_is_cut_in_its_cell_and_given_whole_in_a_note() -> None:
    long_value = "flashinfer_" + "x" * 180
    rows = (_row("sm90", attention=long_value), _row("sm100"))
    table, notes = _table_and_notes(*rows)
    widest = max(len(line) for line in table)
    assert widest <= len("M") + len("sm100") + 3 * MAX_CELL + 8, table
    assert any(line.split()[2].endswith("...") for line in table[2:3]), table
    assert f"note: M on sm90: attention (unpatched -> patched): {long_value}" in notes


@pytest.mark.parametrize("field", ["fails", "fails_unpatched", "refused"])
def test_a_message_worded_over_several_lines_stays_on_its_note_line(field: str) -> None:
    outcome = {"fails": None, "fails_unpatched": None, "refused": None, field: PYDANTIC}
    layer = LayerOutcome("flashinfer_cutlass", unpatched_runner="flashinfer_trtllm", **outcome)
    table, notes = _table_and_notes(_row(layer=layer))
    assert len(table) == 3 and len(notes) == 1, notes
    assert notes[0].startswith("note: M: ") and "QuantizationArgs num_bits Input" in notes[0]


def test_a_layer_that_fails_before_it_has_a_runner_says_so() -> None:
    layer = LayerOutcome(None, fails=PYDANTIC, fails_unpatched=PYDANTIC)
    table, notes = _table_and_notes(_row(layer=layer))
    assert table[2].split()[3:6] == ["auto", "(fails)", "sglang"], table
    assert "None" not in notes[0] and "the MoE layer fails when it is built" in notes[0]


@pytest.mark.parametrize(
    ("search", "says"),
    [
        (
            RunnerSearch(("triton", "cutlass"), (), 9),
            "; --moe-runner-backend triton serves it (one forward on CPU) (also: cutlass)",
        ),
        (
            RunnerSearch((), ("marlin",), 9),
            "; no --moe-runner-backend choice of this SGLang is shown to serve it (9 tried: "
            "marlin reach GPU-only code the CPU simulation cannot run, the others fail or are "
            "refused)",
        ),
        (
            RunnerSearch((), (), 4),
            "; no --moe-runner-backend choice of this SGLang is shown to serve it (4 tried: "
            "each fails or is refused)",
        ),
    ],
)
def test_a_top_k_refusal_says_which_runner_serves_the_layer(
    search: RunnerSearch, says: str
) -> None:
    layer = LayerOutcome(None, refused=TOP_K, search=search)
    row = _row(layer=layer, moe="flashinfer_cutlass")
    assert row.note == f"M: the MoE layer is refused {TOP_K.rstrip('.')}{says}"
    assert row.note in format_table([row], with_patches=True)
