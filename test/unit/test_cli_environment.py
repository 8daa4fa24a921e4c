"""The environment's problems have an exit status of their own, never 70 (a bug) nor 0/1/2:
stdout closed or full, a broken SGLang first on PYTHONPATH, a HOME where torch cannot make its
cache; and a message that cannot be written to stderr changes no exit status (fresh
processes: closed descriptors, /dev/full and PYTHONPATH are properties of a process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accuracy_support import PYTHON_DIR
from sglang_nvfp4_patches.errors import (
    EXIT_ENVIRONMENT,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    environment_cause,
)
from sglang_nvfp4_patches.interrupts import INTERRUPTED


def _cli(*args: str, env: dict[str, str] | None = None, **streams: object) -> tuple[int, str]:
    """``python -m sglang_nvfp4_patches ARGS``: its exit status and stderr."""
    base = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PYTHON_DIR), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-m", "sglang_nvfp4_patches", *args],
        env={**base, **(env or {})},
        stdin=subprocess.DEVNULL,
        **{"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE, **streams},  # type: ignore[arg-type]
        timeout=120,
        check=False,
    )
    return done.returncode, (done.stderr or b"").decode()


def _runs(tmp_path: Path) -> list[str]:
    record = {"id": "law/0", "subject": "law", "answer": "A", "prediction": "A", "correct": True}
    paths = []
    for side in "AB":
        path = tmp_path / f"{side}.json"
        head = {"format": "sglang-nvfp4-patches/accuracy-run", "version": 1, "side": side}
        path.write_text(json.dumps({**head, "records": [record]}))
        paths.append(str(path))
    return paths


def _closed_stdout() -> None:
    os.close(1)


@pytest.mark.parametrize("argv", [["--version"], ["doctor"]])
def test_a_closed_stdout_is_one_line_and_the_environment_status(argv: list[str]) -> None:
    """Once "internal error: AttributeError: 'NoneType' object has no attribute 'flush'"."""
    code, err = _cli(*argv, preexec_fn=_closed_stdout)
    assert code == EXIT_ENVIRONMENT, err
    assert err.startswith("error: stdout is closed") and len(err.splitlines()) == 1


def test_a_full_stdout_is_one_line_and_the_environment_status(tmp_path: Path) -> None:
    with open("/dev/full", "wb") as full:
        code, err = _cli("accuracy", "compare", *_runs(tmp_path), stdout=full)
    assert code == EXIT_ENVIRONMENT, err
    assert err == (
        "error: cannot write the output to stdout (No space left on device); send stdout "
        "somewhere it can be written\n"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["accuracy", "compare", "/nonexistent.json", "b.json"],
        ["accuracy", "run", "--data", "x", "--out", "/tmp/nvfp4-never-written.json"],
        ["explain", "--model", "/nonexistent"],
    ],
)
def test_an_error_line_that_cannot_be_written_keeps_exit_2(argv: list[str]) -> None:
    """Once exit 1, which for compare means "B is significantly worse"."""
    with open("/dev/full", "wb") as full:
        code, _ = _cli(*argv, stderr=full)
    assert code == EXIT_USAGE


def _doctor_with_sglang(directory: Path, init: str) -> tuple[int, str]:
    """``doctor`` with an SGLang whose ``__init__.py`` is ``init`` first on PYTHONPATH."""
    (directory / "sglang").mkdir()
    (directory / "sglang" / "__init__.py").write_text(init)
    path = os.pathsep.join([str(directory), str(PYTHON_DIR), *sys.path])
    return _cli("doctor", env={"PYTHONPATH": path})


@pytest.mark.parametrize(
    ("body", "failure"),
    [
        ("raise ImportError('half-installed')\n", "ImportError: half-installed"),
        ("raise RuntimeError('no CUDA driver')\n", "RuntimeError: no CUDA driver"),
        ("def broken(:\n", "SyntaxError: "),
    ],
    ids=["ImportError", "RuntimeError", "SyntaxError"],
)
def test_a_broken_sglang_first_on_the_path_is_the_environments_problem(
    body: str, failure: str, tmp_path: Path
) -> None:
    """Once 70, "internal error ... a bug", for an SGLang whose import raised RuntimeError or
    SyntaxError (an ImportError was already the environment's)."""
    code, err = _doctor_with_sglang(tmp_path, body)
    assert code == EXIT_ENVIRONMENT, err
    assert err.startswith(
        "error: this Python environment cannot run the command: importing "
        f"{tmp_path / 'sglang'}/__init__.py "
        f"failed with {failure}"
    )
    assert len(err.splitlines()) == 1 and "internal error" not in err


def test_a_stop_inside_an_extension_modules_import_is_a_stop(tmp_path: Path) -> None:
    """Once exit 71, "fix that installation": Ctrl-C 0.3 s into ``explain`` landed in numpy's
    ``_umath_linalg`` initialisation (torch's import), which raised SystemError from it."""
    code, err = _doctor_with_sglang(
        tmp_path,
        "try:\n    raise KeyboardInterrupt\nexcept KeyboardInterrupt as stop:\n"
        "    raise SystemError('initialization of _umath_linalg raised unreported exception')"
        " from stop\n",
    )
    assert (code, err.splitlines()) == (EXIT_INTERRUPTED, [INTERRUPTED])


def test_a_stop_an_extensions_import_turned_into_another_error_is_a_stop(tmp_path: Path) -> None:
    """Once exit 71, "fix that installation": Ctrl-C 0.15 s into ``accuracy run`` landed in
    ``ssl``'s import of ``_ssl``, whose import of ``_socket`` met the KeyboardInterrupt and
    raised ``ImportError: PyCapsule_Import could not import module "_socket"``, which does not
    name it. Here an SGLang does the same: the error it raises has no cause and no context."""
    code, err = _doctor_with_sglang(
        tmp_path,
        "import os, signal, time\nmet = False\n"
        "try:\n    os.kill(os.getpid(), signal.SIGINT)\n    time.sleep(30)\n"
        "except KeyboardInterrupt:\n    met = True\n"
        "if met:\n    raise ImportError('PyCapsule_Import could not import module \"_socket\"')\n",
    )
    assert (code, err.splitlines()) == (EXIT_INTERRUPTED, [INTERRUPTED])


def _import(directory: Path, name: str, body: str) -> BaseException:
    (directory / f"{name}.py").write_text(body)
    sys.path.insert(0, str(directory))
    try:
        __import__(name)
    except BaseException as error:  # what the CLI would catch
        return error
    finally:
        sys.path.remove(str(directory))
        sys.modules.pop(name, None)
    raise AssertionError("the import did not fail")


def test_what_a_module_raises_while_it_is_imported_is_the_environments(tmp_path: Path) -> None:
    """HOME read-only: torch's import-time makedirs raised; a half-installed package raised."""
    made = _import(tmp_path, "needs_cache", "import os\nos.makedirs('/dev/null/cache')\n")
    assert isinstance(made, NotADirectoryError)
    cause = environment_cause(made)
    assert cause is not None and cause.startswith(f"importing {tmp_path / 'needs_cache.py'} ")
    half = _import(tmp_path, "half_installed", "from no_such_module_here import x\n")
    assert environment_cause(half) == (
        "a module it needs is missing (No module named 'no_such_module_here')"
    )


def test_an_os_error_of_a_call_or_of_our_own_code_is_a_bug() -> None:
    def ours() -> None:
        raise OSError("planted")

    try:
        ours()
    except OSError as error:
        assert environment_cause(error) is None  # no import ran: a bug, not the machine
    try:
        import sglang_nvfp4_patches.no_such_module  # noqa: F401
    except ImportError as error:
        assert environment_cause(error) is None  # a module of ours is missing: our bug
