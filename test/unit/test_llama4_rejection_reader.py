"""The Llama 4 rejection reader on methods written here, spelled as refactors spell them (no
SGLang import: each case is a small package of its own, written to disk and imported)."""

from __future__ import annotations

import importlib
import itertools
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from sglang_nvfp4_patches.llama4_router_weight.rejection_question import (
    Verdict,
    read_method,
    read_runner_function,
)

BACKENDS = ("auto", "triton", "flashinfer_trtllm", "flashinfer_cutlass", "marlin")
HEADER = """
class Base:
    def create_moe_runner(self, layer, moe_runner_config):
        self.moe_runner_config = moe_runner_config
"""
_packages = itertools.count()


FLAG_READ = "self.moe_runner_config.apply_router_weight_on_input"


def _many_helpers(calls: int) -> str:
    """``apply`` calls ``h0`` ... on self, one after the other; the last asserts the flag is
    unset."""
    last = calls - 1
    return (
        "class Method(Base):\n"
        + "".join(f"    def h{n}(self):\n        return {n}\n" for n in range(last))
        + f"    def h{last}(self):\n        assert not {FLAG_READ}\n"
        + "    def apply(self, layer, x):\n"
        + "".join(f"        self.h{n}()\n" for n in range(calls))
        + "        return x\n"
    )


def _at(source: str, text: str) -> str:
    """Where ``text`` (a whole line, stripped) lies once ``source`` is written as a case."""
    lines = [line.strip() for line in (HEADER + textwrap.dedent(source)).splitlines()]
    return f" at quant.py:{lines.index(text) + 1}"


def written(tmp_path: Path, text: str) -> tuple[ModuleType, str]:
    """``text`` written as ``readercaseN/quant.py`` (a package of its own) and imported."""
    package = f"readercase{next(_packages)}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "quant.py").write_text(text)
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(f"{package}.quant"), package
    finally:
        sys.path.remove(str(tmp_path))


def read(tmp_path: Path, source: str, method: str = "apply") -> tuple[Verdict, tuple[str, ...]]:
    """``HEADER + source`` written and imported; what ``Method.method`` is read as."""
    module, package = written(tmp_path, HEADER + textwrap.dedent(source))
    reading = read_method(module.Method, method, BACKENDS, package=package)
    return reading.verdict, reading.found


REJECTS = {
    "assert": """
        class Method(Base):
            def apply(self, layer, x):
                assert not self.moe_runner_config.apply_router_weight_on_input, "no"
                return x
        """,
    "if raise": """
        class Method(Base):
            def apply(self, layer, x):
                if self.moe_runner_config.apply_router_weight_on_input:
                    raise NotImplementedError("no")
                return x
        """,
    "else raise": """
        class Method(Base):
            def apply(self, layer, x):
                if not self.moe_runner_config.apply_router_weight_on_input:
                    y = x
                else:
                    raise KeyError("no")
                return y
        """,
    "alias and backend": """
        class Method(Base):
            def apply(self, layer, x, backend):
                config = self.moe_runner_config
                if config.apply_router_weight_on_input and backend.is_flashinfer_cutlass():
                    raise RuntimeError("no")
                return x
        """,
    "helper on self": """
        class Method(Base):
            def _check(self):
                if self.moe_runner_config.apply_router_weight_on_input:
                    raise ValueError("no")

            def apply(self, layer, x):
                self._check()
                return x
        """,
    "helper in the base": """
        class Middle(Base):
            def _check(self):
                cfg = self.moe_runner_config
                assert cfg.apply_router_weight_on_input is False

        class Method(Middle):
            def apply(self, layer, x):
                self._check()
                return x
        """,
    "super": """
        class Middle(Base):
            def apply(self, layer, x):
                assert not self.moe_runner_config.apply_router_weight_on_input
                return x

        class Method(Middle):
            def apply(self, layer, x):
                return super().apply(layer, x)
        """,
    "property": """
        class Method(Base):
            @property
            def _supported(self):
                if self.moe_runner_config.apply_router_weight_on_input:
                    raise NotImplementedError("no")
                return True

            def apply(self, layer, x):
                ok = self._supported
                return x
        """,
    "module function": """
        def _require_no_router_weight(config, where):
            if config.apply_router_weight_on_input:
                raise NotImplementedError(where)

        class Method(Base):
            def apply(self, layer, x):
                _require_no_router_weight(self.moe_runner_config, "cutlass")
                return x
        """,
    "module function, the config by keyword": """
        def _require_no_router_weight(where, config=None):
            assert not config.apply_router_weight_on_input, where

        class Method(Base):
            def apply(self, layer, x):
                _require_no_router_weight("cutlass", config=self.moe_runner_config)
                return x
        """,
    "derived value to a raising helper": """
        def _fail():
            raise NotImplementedError("no")

        class Method(Base):
            def apply(self, layer, x):
                on_input = self.moe_runner_config.apply_router_weight_on_input
                supported = not on_input
                if not supported:
                    _fail()
                return x
        """,
    "walrus": """
        class Method(Base):
            def apply(self, layer, x):
                if (on_input := self.moe_runner_config.apply_router_weight_on_input):
                    raise ValueError(on_input)
                return x
        """,
    "getattr": """
        class Method(Base):
            def apply(self, layer, x):
                assert not getattr(self.moe_runner_config, "apply_router_weight_on_input", 0)
                return x
        """,
    "getattr without a default": """
        class Method(Base):
            def apply(self, layer, x):
                assert not getattr(self.moe_runner_config, "apply_router_weight_on_input")
                return x
        """,
    "a derived value handed to a helper": """
        def _check(ok):
            if not ok:
                raise NotImplementedError("no")

        class Method(Base):
            def apply(self, layer, x):
                _check(not self.moe_runner_config.apply_router_weight_on_input)
                return x
        """,
    "raised after the branch": """
        class Method(Base):
            def apply(self, layer, x):
                if not self.moe_runner_config.apply_router_weight_on_input:
                    return x
                raise NotImplementedError("no")
        """,
    "a nested function": """
        class Method(Base):
            def apply(self, layer, x):
                def check():
                    if self.moe_runner_config.apply_router_weight_on_input:
                        raise NotImplementedError("no")

                check()
                return x
        """,
    "the config from a list": """
        class Method(Base):
            def apply(self, layer, x):
                assert not [self.moe_runner_config][0].apply_router_weight_on_input
                return x
        """,
    "a walrus's name tested later": """
        class Method(Base):
            def apply(self, layer, x):
                ok = (on_input := self.moe_runner_config.apply_router_weight_on_input) or x
                if on_input:
                    raise NotImplementedError("no")
                return x
        """,
    "a harmless builtin handed self": """
        class Method(Base):
            def apply(self, layer, x):
                assert isinstance(self, Base)
                assert not self.moe_runner_config.apply_router_weight_on_input
                return x
        """,
    "48 helpers, the most it follows": _many_helpers(48),
    "only on the CUTLASS branch": """
        class Method(Base):
            def apply(self, layer, x, backend):
                if backend.is_flashinfer_trtllm():
                    return x * self.moe_runner_config.apply_router_weight_on_input
                if self.use_marlin:
                    return self.moe_runner_config.apply_router_weight_on_input
                if backend.is_flashinfer_cutlass():
                    assert not self.moe_runner_config.apply_router_weight_on_input
                    return x
                return x if self.moe_runner_config.apply_router_weight_on_input else 0
        """,
}

UPSTREAM = {
    "reads nothing": (
        """
        class Method(Base):
            def apply(self, layer, x):
                return self.runner.run(x, self.moe_runner_config.top_k)
        """,
        Verdict.DOES_NOT_READ,
    ),
    "handles it": (
        """
        class Method(Base):
            def apply(self, layer, x, w):
                return x * w if self.moe_runner_config.apply_router_weight_on_input else x
        """,
        Verdict.USES,
    ),
    "a recursive helper": (
        """
        def _walk(config, n):
            return _walk(config, n - 1) if n else config.apply_router_weight_on_input

        class Method(Base):
            def apply(self, layer, x):
                return x * _walk(self.moe_runner_config, 3)
        """,
        Verdict.USES,
    ),
    "a loop reads what its last pass set": (
        """
        class Method(Base):
            def apply(self, layer, x):
                for i in range(2):
                    if i:
                        y = last
                    last = x
                return x * self.moe_runner_config.apply_router_weight_on_input
        """,
        Verdict.USES,
    ),
    "hands it to a kernel": (
        """
        import math

        class Method(Base):
            def apply(self, layer, x):
                cfg = self.moe_runner_config
                return math.copysign(x, cfg.apply_router_weight_on_input)
        """,
        Verdict.USES,
    ),
}

WITHOUT_SOURCE = """
    namespace = {"__name__": __name__}
    exec("def _check(self):\\n    pass", namespace)

    class Method(Base):
        _check = namespace["_check"]

        def apply(self, layer, x):
            self._check()
            return x
    """
TOO_DEEP = (
    "class Method(Base):\n"
    + "".join(f"    def h{n}(self):\n        self.h{n + 1}()\n" for n in range(20))
    + "    def h20(self):\n"
    + "        assert not self.moe_runner_config.apply_router_weight_on_input\n"
    + "    def apply(self, layer, x):\n        self.h0()\n        return x\n"
)
TOO_MANY = _many_helpers(61)

# The flag read where nothing but its reading judges it: each body is a method's whole body.
READ_IN_PLACE = {
    "unpacked into names": f"on_input, y = {FLAG_READ}, x\nreturn y",
    "a name standing for it added to": f"on_input = {FLAG_READ}\non_input += 1\nreturn x",
    "a loop over it": f"for on_input in [{FLAG_READ}]:\n    x = x + 1\nreturn x",
    "a loop while it holds": f"while {FLAG_READ}:\n    break\nreturn x",
    "raised": f'raise {FLAG_READ} or RuntimeError("no")',
    "matched": f"match {FLAG_READ}:\n    case _:\n        return x",
    "a context manager": f"with {FLAG_READ}:\n    return x",
}
UPSTREAM.update(
    {
        name: (
            "class Method(Base):\n    def apply(self, layer, x):\n"
            + textwrap.indent(body, " " * 8),
            Verdict.USES,
        )
        for name, body in READ_IN_PLACE.items()
    }
)

UNKNOWN = {
    "a table of checks": (
        """
        def _check(config):
            assert not config.apply_router_weight_on_input

        CHECKS = [_check]

        class Method(Base):
            def apply(self, layer, x):
                CHECKS[0](self.moe_runner_config)
                return x
        """,
        "hands self.moe_runner_config to CHECKS[0], which this reader cannot read",
    ),
    "through the layer": (
        """
        class Method(Base):
            def apply(self, layer, x):
                if layer.moe_runner_config.apply_router_weight_on_input:
                    raise NotImplementedError("no")
                return x
        """,
        "rejects it through layer.moe_runner_config.apply_router_weight_on_input, which the "
        "lift does not hide",
    ),
    "its name in a variable": (
        """
        FLAG = "apply_router_weight_on_input"

        class Method(Base):
            def apply(self, layer, x):
                assert not getattr(self.moe_runner_config, FLAG)
                return x
        """,
        "hands self.moe_runner_config to getattr",
    ),
    "a config that may be another object's": (
        """
        class Method(Base):
            def apply(self, layer, x):
                config = self.moe_runner_config if x else layer.moe_runner_config
                if config.apply_router_weight_on_input:
                    raise NotImplementedError("no")
                return x
        """,
        "rejects it through config.apply_router_weight_on_input, which the lift does not hide",
    ),
    "a test it cannot decide": (
        """
        class Method(Base):
            def apply(self, layer, x):
                if self.moe_runner_config.apply_router_weight_on_input or x is None:
                    raise NotImplementedError("no")
                return x
        """,
        "a test of the flag this reader cannot decide",
    ),
    "rejects and uses": (
        """
        class Method(Base):
            def apply(self, layer, x, w):
                assert not self.moe_runner_config.apply_router_weight_on_input
                return x * w if self.moe_runner_config.apply_router_weight_on_input else x
        """,
        "both rejects it (assert at quant.py:",
    ),
    "a helper not on the class": (
        """
        class Method(Base):
            def apply(self, layer, x):
                self._installed_later(x)
                return x
        """,
        "hands self to self._installed_later",
    ),
    "an assert that needs the flag": (
        """
        class Method(Base):
            def apply(self, layer, x):
                assert self.moe_runner_config.apply_router_weight_on_input
                return x
        """,
        "an assert on the flag that the flag read as False fails",
    ),
    "an assert the flag does not decide": (
        """
        class Method(Base):
            def apply(self, layer, x):
                assert not self.moe_runner_config.apply_router_weight_on_input or True
                return x
        """,
        "an assert on the flag that passes whatever it reads",
    ),
    "checked before the lift": (
        """
        class Method(Base):
            def create_moe_runner(self, layer, moe_runner_config):
                if moe_runner_config.apply_router_weight_on_input:
                    raise NotImplementedError("no")

            def apply(self, layer, x):
                return x
        """,
        "create_moe_runner, run before the lift: ",
    ),
    "a short-circuit check": (
        """
        def _unsupported():
            raise NotImplementedError("no")

        class Method(Base):
            def apply(self, layer, x):
                self.moe_runner_config.apply_router_weight_on_input and _unsupported()
                return x
        """,
        "the flag decides whether _unsupported runs",
    ),
    "names that stand for each other": (
        """
        class Method(Base):
            def apply(self, layer, x):
                a = b + 1
                b = a * 2
                assert not self.moe_runner_config.apply_router_weight_on_input or a
                return x
        """,
        "reads b before it is set at quant.py:",
    ),
    "no such method": (
        """
        class Method(Base):
            pass
        """,
        "Method.apply not found",
    ),
    "a helper without source": (
        WITHOUT_SOURCE,
        "cannot read _check (OSError: could not get source code)"
        + _at(WITHOUT_SOURCE, "self._check()"),
    ),
    "writes the flag": (
        """
        class Method(Base):
            def apply(self, layer, x):
                self.moe_runner_config.apply_router_weight_on_input = False
                return x
        """,
        "writes the flag at quant.py:",
    ),
    "its name as a string": (
        """
        class Method(Base):
            def apply(self, layer, x):
                names = {"apply_router_weight_on_input": 1}
                return x
        """,
        "names the flag as a string at quant.py:",
    ),
    "a chain of helpers too deep to follow": (
        TOO_DEEP,
        "h11() is nested too deep" + _at(TOO_DEEP, "self.h11()"),
    ),
    "more helpers than it follows": (
        TOO_MANY,
        "more than 48 functions to follow" + _at(TOO_MANY, "self.h48()"),
    ),
}


@pytest.mark.parametrize("name", REJECTS)
def test_a_rejection_in_any_spelling_is_read_as_one(tmp_path: Path, name: str) -> None:
    verdict, found = read(tmp_path, REJECTS[name])
    assert verdict is Verdict.REJECTS, found
    assert len(found) == 1 and " at quant.py:" in found[0]


@pytest.mark.parametrize("name", UPSTREAM)
def test_what_it_finds_without_a_rejection_is_no_conclusion(tmp_path: Path, name: str) -> None:
    """Uses and no read at all are what the reader saw; the plugin never takes them for
    "upstream" (method_lift.decide: that needs a record of behaviour)."""
    source, expected = UPSTREAM[name]
    verdict, found = read(tmp_path, source)
    assert verdict is expected, found


@pytest.mark.parametrize("name", UNKNOWN)
def test_what_it_cannot_read_is_unknown(tmp_path: Path, name: str) -> None:
    source, why = UNKNOWN[name]
    verdict, found = read(tmp_path, source)
    assert verdict is Verdict.UNKNOWN
    assert why in found[0], found


def test_a_rejection_names_its_exception_and_line(tmp_path: Path) -> None:
    _, found = read(tmp_path, REJECTS["if raise"])
    lines = (HEADER + textwrap.dedent(REJECTS["if raise"])).splitlines()
    (line,) = [n for n, text in enumerate(lines, 1) if "if self.moe_runner_config" in text]
    assert found == (f"raise NotImplementedError at quant.py:{line}",)


TOP_K_ONLY = """
    class Method(Base):
        def apply(self, layer, x):
            config = self.moe_runner_config
            if config.apply_router_weight_on_input and config.top_k > 1:
                raise NotImplementedError("no")
            return x
    """


def test_a_rejection_of_top_k_above_1_only_says_so(tmp_path: Path) -> None:
    module, package = written(tmp_path, HEADER + textwrap.dedent(TOP_K_ONLY))
    reading = read_method(module.Method, "apply", BACKENDS, package=package)
    assert reading.verdict is Verdict.REJECTS and reading.only_top_k_above_1, reading
    assert reading.found[0].startswith("raise NotImplementedError only with top-k > 1 at quant.py:")
    plain, package = written(tmp_path, HEADER + textwrap.dedent(REJECTS["if raise"]))
    assert not read_method(plain.Method, "apply", BACKENDS, package=package).only_top_k_above_1


def test_a_function_without_source_is_unknown(tmp_path: Path) -> None:
    source = """
    namespace = {}
    exec("def apply(self, layer, x):\\n    return x", namespace)

    class Method(Base):
        apply = namespace["apply"]
    """
    verdict, found = read(tmp_path, source)
    assert verdict is Verdict.UNKNOWN and found[0].startswith("cannot read Method.apply")


RUNNER = """
def _prescale(dispatch, runner_config):
    if not runner_config.apply_router_weight_on_input:
        return dispatch
    return dispatch * 2


def fused_rejects(dispatch, quant_info, runner_config):
    assert not runner_config.apply_router_weight_on_input, "no"
    return dispatch


def fused_prescales(dispatch, quant_info, runner_config):
    return _prescale(dispatch, runner_config=runner_config)


def fused_elsewhere(dispatch, quant_info, runner_config):
    return quant_info.kernel(dispatch, runner_config)
"""


@pytest.mark.parametrize(
    ("function", "verdict", "found"),
    [
        ("fused_rejects", Verdict.REJECTS, "assert at quant.py:"),
        ("fused_prescales", Verdict.USES, "decides what runs at quant.py:"),
        ("fused_elsewhere", Verdict.UNKNOWN, "hands runner_config to quant_info.kernel"),
        ("_prescale", Verdict.UNKNOWN, "_prescale takes no parameter 3"),
    ],
)
def test_a_runner_fused_function_is_read_through_its_config_parameter(
    tmp_path: Path, function: str, verdict: Verdict, found: str
) -> None:
    module, package = written(tmp_path, RUNNER)
    reading = read_runner_function(getattr(module, function), BACKENDS, package=package)
    assert reading.verdict is verdict and found in reading.found[0], reading
