"""What a value-flow reading is asked (pure: ``ast`` and ``re`` only): which argument of which
calls (the sinks) to follow back, to which value (the source), and which branches lie on the
path walked. A patch's question fills one in; :class:`.value_flow.ValueFlow` walks it."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass

from sglang_nvfp4_patches.source_reader.flow_state import Arguments, Side
from sglang_nvfp4_patches.source_reader.values import Origin


@dataclass(frozen=True)
class FlowQuestion:
    # Attributes (and getattr names) that are the source: ``layer.v_scale``.
    source_name: re.Pattern[str]
    # Calls named so, and not defined in the module, are sinks: the walk records
    # ``sink_value(call)`` for each.
    sink_prefix: str
    sink_value: Callable[[Arguments], set[Origin]]
    # (what a test being true says, what it being false says) about the path walked, given
    # the names bound to earlier tests: ``OFF_PATH`` keeps a side from being walked.
    path_sides: Callable[[ast.expr, dict[str, tuple[Side, Side]]], tuple[Side, Side]]
    # Calls whose result is still the source they are handed (``float(v)``).
    preserving_calls: frozenset[str] = frozenset()
    # Methods that make a constant of the source they are called on (``v.new_ones()``).
    constant_methods: frozenset[str] = frozenset()
