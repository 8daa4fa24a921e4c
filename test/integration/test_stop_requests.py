"""Stop requests at any moment, in processes started as a user's shell starts them: Ctrl-C
(SIGINT) in the foreground, a script's ``kill $pid`` (SIGTERM) on its background job, whose
SIGINT is ignored. Each ends the command with one line on stderr and exit 130, from the
first instruction of the console script on; and the test suite itself runs as such a job."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib

from accuracy_support import PYTHON_DIR
from accuracy_support.dataset_writer import write_dataset
from accuracy_support.script_job import ScriptJob
from sglang_nvfp4_patches.errors import EXIT_INTERRUPTED

REPO = PYTHON_DIR.parent
DELAYS_S = (0.05, 0.1, 0.15, 0.3)  # the command line's imports (issue 38: 0.05-0.15 s, and later)
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PYTHON_DIR), *sys.path])}


def console_script(directory: Path) -> Path:
    """The console script as pip writes it from pyproject's ``[project.scripts]`` entry."""
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts["sglang-nvfp4-patches"].split(":")
    script = directory / "sglang-nvfp4-patches"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom {module} import {function}\n"
        f"if __name__ == '__main__':\n    sys.exit({function}())\n"
    )
    script.chmod(0o755)
    return script


# The moment the stop handling is in place, as the tests below see it: this package sets
# SIGTERM's handler. A ``sitecustomize`` built from this runs ``act(VALUE)`` at that moment,
# in the process given ``NVFP4_TEST_VALUE`` only (popped: the processes it starts, such as
# verify's, inherit neither the variable nor what ``act`` uses).
ON_STOP_HANDLING = """import builtins, os, signal
{act}
VALUE, SET = os.environ.pop("NVFP4_TEST_VALUE", None), signal.signal
def set_and_act(signum, handler):
    previous = SET(signum, handler)
    if signum == signal.SIGTERM and callable(handler):
        signal.signal = SET
        act(VALUE)
    return previous
if VALUE is not None:
    signal.signal = set_and_act
"""

# The delays below count from the moment the stop handling is in place: this package sets
# SIGTERM's handler (``ON_STOP_HANDLING`` with ``TELL_THE_PIPE`` says when).
# What comes before it is Python's own start (site, .pth files, runpy for -m) and this
# package's first few lines: on a machine under a load of 20, one CI run's process was
# descheduled for over 50 ms right there, after a marker at this package's first import, and
# SIGTERM's default action ended it. That window is checked without a clock instead:
# ``test_the_stop_handling_is_in_place_before_any_module_python_did_not_load_already``.
TELL_THE_PIPE = """def act(fd):
    os.write(int(fd), b"s")
    os.close(int(fd))
"""


def with_sitecustomize(directory: Path, text: str, **extra: str) -> dict[str, str]:
    """The environment of a Python that runs ``text`` as its ``sitecustomize`` first."""
    (directory / "sitecustomize.py").write_text(text)
    path = os.pathsep.join([str(directory), ENV["PYTHONPATH"]])
    return {**ENV, "PYTHONPATH": path, **extra}


def started_python(directory: Path) -> tuple[dict[str, str], int]:
    """The environment of a process that writes one byte to the returned pipe once this
    package has set SIGTERM's handler; the pipe's reading end."""
    read, write = os.pipe()
    text = ON_STOP_HANDLING.format(act=TELL_THE_PIPE)
    return with_sitecustomize(directory, text, NVFP4_TEST_VALUE=str(write)), read


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A base URL whose server accepts connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


@pytest.mark.parametrize("command", ["doctor", "verify", "accuracy run", "explain"])
def test_a_stop_request_at_any_early_moment_is_one_line_and_130(
    command: str, tmp_path: Path, silent_server: str
) -> None:
    """Once a KeyboardInterrupt traceback within the first 0.05-0.15 s (the command line
    was being imported) and, for SIGTERM in those first moments, exit -15 without a word."""
    argv = command.split()
    if command == "accuracy run":
        data = tmp_path / "mmlu"
        write_dataset(data, {"anatomy": 2})
        argv += ["--base-url", silent_server, "--data", str(data), "--out", str(tmp_path / "r")]
    script = console_script(tmp_path)
    seen = []
    for delay in DELAYS_S:
        for sig in (signal.SIGINT, signal.SIGTERM):
            env, started = started_python(tmp_path)
            fd = int(env["NVFP4_TEST_VALUE"])
            if sig == signal.SIGINT:  # Ctrl-C on the console script in the foreground
                proc = subprocess.Popen(
                    [str(script), *argv], env=env, stderr=subprocess.PIPE, pass_fds=(fd,)
                )
            else:  # `python -m ... &` in a script, then `kill $pid`
                module = [sys.executable, "-m", "sglang_nvfp4_patches", *argv]
                proc = ScriptJob(module, env=env, stderr=subprocess.PIPE, pass_fds=(fd,))  # type: ignore[assignment]
            os.close(fd)
            with os.fdopen(started, "rb") as pipe:
                assert pipe.read(1) == b"s"
            time.sleep(delay)
            proc.send_signal(sig)
            _, stderr = proc.communicate(timeout=60)
            lines = stderr.decode().splitlines()
            seen.append((delay, sig.name, proc.returncode, lines))
    wrong = [
        s
        for s in seen
        if s[2] != EXIT_INTERRUPTED or len(s[3]) != 1 or "interrupted" not in s[3][0]
    ]
    assert wrong == [], wrong


def test_the_suite_runs_as_a_script_background_job() -> None:
    """Once ``pytest &`` in a script (``nohup .ci/run &``) refused to run: SIGINT ignored.
    Here the suite's Ctrl-C test runs that way, and its process must still stop on SIGINT."""
    test = "test/unit/test_accuracy_run.py::test_resume_after_kill_loses_and_repeats_nothing"
    pytest_command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    proc = ScriptJob(
        [*pytest_command, f"{test}[SIGINT]"],
        cwd=REPO,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.sigint_ignored()
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, output
    assert "1 passed" in output


def test_the_stop_handling_is_in_place_before_any_module_python_did_not_load_already() -> None:
    """The window before the timed test above starts its clock, checked without one: between
    this package's first import and the stop handling, nothing may load that Python's own
    start did not (``typing`` alone costs ~15 ms on a busy machine, half of the earliest
    delay)."""
    probe = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import sglang_nvfp4_patches.__main__\n"
        "from sglang_nvfp4_patches.interrupts import stop_requests_as_interrupt\n"
        "with stop_requests_as_interrupt():\n"
        "    added = set(sys.modules) - before\n"
        "print(' '.join(sorted(added)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], env=ENV, capture_output=True, text=True, check=True
    ).stdout.split()
    ours = {
        "sglang_nvfp4_patches",
        "sglang_nvfp4_patches.__main__",
        "sglang_nvfp4_patches.interrupts",
    }
    light = {"contextlib", "signal", "enum", "collections", "functools", "keyword", "operator"}
    light |= {"reprlib", "itertools", "types", "_collections", "_functools", "_operator"}
    light |= {"__future__", "collections.abc"}
    heavy = set(out) - ours - light
    assert heavy == set(), f"imported before the stop handling is in place: {sorted(heavy)}"


def test_an_accuracy_run_keeps_asyncios_own_ctrl_c_handling() -> None:
    """The stop handling notes each Ctrl-C with a SIGINT handler of its own; asyncio's runner
    installs its own (which cancels the main task, so that clean-ups run there) only where it
    finds Python's, so the run's event loop gets Python's back for its time."""
    from sglang_nvfp4_patches.accuracy.run import _run_coroutine
    from sglang_nvfp4_patches.interrupts import stop_requests_as_interrupt

    seen: list[object] = []

    async def look() -> None:
        seen.append(signal.getsignal(signal.SIGINT))

    before = signal.getsignal(signal.SIGINT)
    with stop_requests_as_interrupt():
        noting = signal.getsignal(signal.SIGINT)
        _run_coroutine(look())
        assert signal.getsignal(signal.SIGINT) is noting
    assert signal.getsignal(signal.SIGINT) is before is signal.default_int_handler
    assert noting is not before
    (during,) = seen
    assert getattr(getattr(during, "func", None), "__name__", "") == "_on_sigint", during


def test_a_stop_python_swallows_in_a_weakref_callback_is_sent_again(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Once an ``accuracy run``'s SIGTERM landed in an import lock's weakref callback
    (``importlib._bootstrap``'s ``cb``): Python printed "Exception ignored in" and the run went
    on waiting for its server. Here the stop lands in such a callback; the block must still
    end with the KeyboardInterrupt, in the code after it, and print nothing."""
    import weakref

    from sglang_nvfp4_patches.interrupts import stop_requests_as_interrupt

    class Held:
        pass

    def callback(_: object) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # its handler runs before this returns

    reached = []
    stopped = False
    hook = sys.unraisablehook
    try:
        with stop_requests_as_interrupt():
            assert sys.unraisablehook is not hook
            held = Held()
            ref = weakref.ref(held, callback)
            del held  # the callback runs, and Python swallows what it raises
            reached.append("after the callback")
            time.sleep(5)
    except KeyboardInterrupt:
        stopped = True
    assert ref() is None and sys.unraisablehook is hook
    assert (stopped, reached) == (True, ["after the callback"])
    assert capfd.readouterr().err == ""


def test_a_stop_an_extension_prints_with_pyerr_print_is_sent_again(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Once a ``doctor`` stopped 0.15-0.3 s in printed a KeyboardInterrupt traceback from
    ``_lock_unlock_module`` before its "interrupted": an extension's import ran Python code
    from C, the stop landed there, and the extension printed it with ``PyErr_Print`` (which
    calls ``sys.excepthook``). Here C code runs Python that the stop lands in; the block must
    end with the KeyboardInterrupt after it, and print nothing."""
    import ctypes

    from sglang_nvfp4_patches.interrupts import stop_requests_as_interrupt

    hook = sys.excepthook
    code = b"import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n"
    reached = []
    try:
        with stop_requests_as_interrupt():
            failed = ctypes.pythonapi.PyRun_SimpleString(code)  # PyErr_Print on failure
            reached.append(failed)
            time.sleep(5)
    except KeyboardInterrupt:
        reached.append("stopped")
    assert reached == [-1, "stopped"] and sys.excepthook is hook
    assert capfd.readouterr().err == ""


def test_a_stop_noted_in_an_outer_block_counts_in_a_nested_one_not_in_the_next() -> None:
    """The console script's block holds the command line's own: a Ctrl-C that an import lost
    before the inner block began is still the stop there; a later command starts afresh."""
    from sglang_nvfp4_patches.interrupts import caused_by_interrupt, stop_requests_as_interrupt

    lost = ImportError('PyCapsule_Import could not import module "_socket"')
    with stop_requests_as_interrupt():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt:
            pass
        with stop_requests_as_interrupt():
            assert caused_by_interrupt(lost)
    with stop_requests_as_interrupt():
        assert not caused_by_interrupt(lost)


LOST_IN_THE_CLI_IMPORT = """import os, signal, sys
class LoseTheStop:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "sglang_nvfp4_patches.cli":
            return None
        sys.meta_path.remove(LoseTheStop)
        met = False
        try:
            os.kill(os.getpid(), signal.SIGINT)
            import time; time.sleep(30)
        except KeyboardInterrupt:
            met = True
        if met:
            raise ImportError('PyCapsule_Import could not import module "_socket"')
sys.meta_path.insert(0, LoseTheStop)
"""


def test_a_stop_lost_while_the_command_line_is_imported_is_one_line_and_130(
    tmp_path: Path,
) -> None:
    """The console script's own handling, before the command line's: an import that turned
    the Ctrl-C into an ImportError is the stop, never a traceback."""
    env = with_sitecustomize(tmp_path, LOST_IN_THE_CLI_IMPORT)
    done = subprocess.run(
        [str(console_script(tmp_path)), "doctor"], env=env, capture_output=True, text=True
    )
    assert (done.returncode, done.stderr.splitlines()) == (EXIT_INTERRUPTED, ["interrupted"])


# Once ``python -m sglang_nvfp4_patches doctor``, stopped while dataclasses built a class's
# methods from a string, printed "interrupted" and ended by SIGINT (status -2, not 130): a
# KeyboardInterrupt out of code Python runs from a string marks the process for SIGINT at its
# exit, caught or not. Here the stop lands in the first such string run once the stop handling
# is in place (SIGTERM's handler set).
STOP_IN_THE_NEXT_STRING = """EXEC = builtins.exec
def act(signum):
    def exec_with_a_stop(source, *args):
        if isinstance(source, str):
            builtins.exec = EXEC
            source = f"import os; os.kill(os.getpid(), {signum})\\n{source}"
        return EXEC(source, *args)
    builtins.exec = exec_with_a_stop
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_stop_in_code_run_from_a_string_still_exits_130(
    sig: signal.Signals, tmp_path: Path
) -> None:
    text = ON_STOP_HANDLING.format(act=STOP_IN_THE_NEXT_STRING)
    env = with_sitecustomize(tmp_path, text, NVFP4_TEST_VALUE=str(int(sig)))
    done = subprocess.run(
        [sys.executable, "-m", "sglang_nvfp4_patches", "doctor"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stderr.splitlines()) == (EXIT_INTERRUPTED, ["interrupted"])


def test_a_stop_that_some_code_caught_still_ends_the_command_with_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once a SIGHUP inside a class body's ``__set_name__`` (Python wraps the KeyboardInterrupt
    in a RuntimeError) became doctor's "failed: cannot read state" and exit 1."""
    from sglang_nvfp4_patches import cli

    def swallowing(_: object) -> int:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
        except BaseException:  # as a probe's broad except once did, wrapped or not
            pass
        return 1  # a verdict the stop must not turn into

    monkeypatch.setattr(cli, "_run_doctor", swallowing)
    assert cli.main(["doctor"]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err.splitlines() == ["interrupted"]
