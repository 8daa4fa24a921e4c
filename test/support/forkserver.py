"""Fresh Python processes without paying SGLang's import each time.

Importing ``sglang`` costs about 4 s of CPU, more than most tests that start SGLang in a new
process do after it. A fork server imports it once; each run is a child forked from it that
then behaves like ``python SCRIPT ARGS`` or ``python -m MODULE ARGS`` would.

Why a child is as good as a fresh interpreter for the tests that use it: every process that
touches SGLang imports the ``sglang`` package first, before it can load plugins or simulate a
GPU, so the child is in the state any such process reaches at that point. The server imports
nothing else of SGLang, never our package, never calls ``load_plugins()``, and imports only
the third-party packages in ``PRELOADED``, which the plugin never hooks. The child inherits
the environment pytest had when the server started. It may set only the variables that SGLang
and the plugin read when plugins load (``SGLANG_PLUGINS``, ``SGLANG_NVFP4_*``); any other is
refused, because SGLang may have read it while the server imported it. Tests about the
interpreter itself (import trace, start-up time, Ctrl-C during imports, import-time warnings)
need a plain ``subprocess`` instead.

A zygote is a child of the server that goes further before it forks children of its own:
it imports the modules SGLang's scheduler process has imported when it loads plugins
(:data:`SCHEDULER_MODULES`), optionally from an edited copy of SGLang put first (as
``support/edited_sglang.py`` does). Its children are in the state of a scheduler process
just before ``load_plugins()``: SGLang's model modules imported, no plugin loaded. The plugin
then hooks modules already imported, the way it does in every scheduler process, instead of
hooking them as they are imported; tests about that second way (when a hook fires, what
plugin loading prints) use the server itself. What a zygote imports does not read the
per-child variables: SGLang reads ``SGLANG_PLUGINS`` and the plugin its own only when plugins
load, in the child.

Protocol (JSON lines): ``{"start": {...}}`` forks and answers ``{"pid": N}``;
``{"wait": N}`` answers ``{"returncode": R}`` when that child ends; ``{"zygote": {...}}``
forks a zygote that answers on its own pair of FIFOs (first ``{"ready": true}``, or
``{"error": TEXT}`` when its imports failed) and answers ``{"pid": N}``.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

PRELOADED = ("sglang", "flashinfer", "openai", "torch._inductor.compile_fx")
# What a scheduler process has imported when ``run_scheduler_process`` calls
# ``load_plugins()``: its module imports these (``test_fork_server.py`` checks it on the
# primary release; older ones need a GPU to import it), and more, but not the scheduler
# module itself, whose import configures logging.
SCHEDULER_MODULES = (
    "sglang.srt.server_args",
    "sglang.srt.configs.model_config",
    "sglang.srt.layers.quantization",
    "sglang.srt.layers.moe.fused_moe_triton.layer",
)
# Read only when plugins load (SGLang, the plugin), or by pytest: each child sets its own.
PER_CHILD_VARIABLES = ("SGLANG_PLUGINS", "SGLANG_NVFP4_", "PYTEST_CURRENT_TEST")
RECORDS_ENV = "SGLANG_NVFP4_PATCHES_RECORDS"


# ---------------------------------------------------------------- server side (own process)


def _exit_code(error: SystemExit) -> int:
    """What the interpreter exits with for ``raise SystemExit(code)``."""
    if error.code is None:
        return 0
    if isinstance(error.code, int):
        return error.code & 0xFF
    print(error.code, file=sys.stderr)
    return 1


def _run_child(request: dict[str, Any], *, protocol_fds: Sequence[int]) -> None:
    """In the forked child: become ``python ARGS`` and exit as the interpreter would."""
    for fd in protocol_fds:
        os.close(fd)
    for target, path, flags in (
        (0, os.devnull, os.O_RDONLY),
        (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    ):
        fd = os.open(path, flags)
        if fd != target:
            os.dup2(fd, target)
            os.close(fd)
    sys.stdin = open(os.devnull)  # noqa: SIM115  # not the server's: it holds read-ahead requests
    os.chdir(request["cwd"])
    for name in [k for k in os.environ if k.startswith(PER_CHILD_VARIABLES)]:
        del os.environ[name]
    os.environ.update(
        {k: v for k, v in request["env"].items() if k.startswith(PER_CHILD_VARIABLES)}
    )
    args: list[str] = request["args"]
    import runpy

    code = 0
    try:
        if args[0] == "-m":
            sys.argv = [args[1], *args[2:]]
            sys.path[0] = os.getcwd()
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(args)
            sys.path[0] = str(Path(args[0]).resolve().parent)
            runpy.run_path(args[0], run_name="__main__")
    except SystemExit as error:
        code = _exit_code(error)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code = -signal.SIGINT
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # what interpreter exit does
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = code or 120
    if code == -signal.SIGINT:  # an uncaught Ctrl-C ends the process by the signal
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)


def _refuse_our_package(where: str) -> None:
    ours = sorted(m for m in sys.modules if m.split(".")[0] == "sglang_nvfp4_patches")
    if ours:  # a child would then not load the plugin the way a fresh process does
        raise SystemExit(f"fork server: {where} imported the plugin itself: {ours}")


def _serve(requests: IO[str], answers: IO[str]) -> None:
    """Fork a child (or a zygote) per request until ``requests`` ends; then kill the
    children still running."""
    children: set[int] = set()
    protocol_fds = (answers.fileno(), requests.fileno())
    for line in requests:
        request = json.loads(line)
        if "wait" in request:
            pid = request["wait"]
            _, status = os.waitpid(pid, 0)
            children.discard(pid)
            answer: dict[str, Any] = {"returncode": os.waitstatus_to_exitcode(status)}
        else:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0 and "start" in request:
                _run_child(request["start"], protocol_fds=protocol_fds)
            if pid == 0:
                _become_zygote(request["zygote"], protocol_fds=protocol_fds)
            children.add(pid)
            answer = {"pid": pid}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
    for pid in children:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _become_zygote(request: dict[str, Any], *, protocol_fds: Sequence[int]) -> None:
    """In the forked child: import what a scheduler process has imported (from the copy
    first, if any), then serve requests on the zygote's own FIFOs."""
    for fd in protocol_fds:
        os.close(fd)
    for target, flags in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):
        # never the server's request pipe; what importing prints belongs to no child
        null = os.open(os.devnull, flags)
        if null != target:
            os.dup2(null, target)
            os.close(null)
    requests = open(request["requests"])  # noqa: SIM115  # the client opens the other ends
    answers = open(request["answers"], "w")  # noqa: SIM115
    try:
        import importlib

        if request["copy"] is not None:  # only then: the plain zygote holds no test module
            from edited_sglang import put_first  # this script's folder is first on sys.path

            put_first(request["copy"])
        for name in request["modules"]:
            importlib.import_module(name)
        _refuse_our_package("a zygote's imports")
    except BaseException as error:
        answers.write(json.dumps({"error": f"{type(error).__name__}: {error}"}) + "\n")
        answers.flush()
        os._exit(1)
    answers.write(json.dumps({"ready": True}) + "\n")
    answers.flush()
    _serve(requests, answers)
    os._exit(0)


def serve() -> None:
    """Import SGLang once, then fork a child per request until stdin closes."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever importing prints must not reach the protocol pipe
    import importlib

    for name in PRELOADED:
        importlib.import_module(name)
    _refuse_our_package("preloading")
    _serve(sys.stdin, answers)


# ---------------------------------------------------------------- client side (pytest)


@dataclass
class Child:
    """A started run; :meth:`wait` returns what ``subprocess.run`` would."""

    server: ForkServer
    args: list[str]
    pid: int
    folder: Path

    def wait(self, timeout: float) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, *self.args]
        try:
            try:
                returncode = self.server._wait(self.pid, timeout)
            except TimeoutError:
                raise subprocess.TimeoutExpired(command, timeout) from None
            return subprocess.CompletedProcess(
                command,
                returncode,
                (self.folder / "stdout").read_text(errors="replace"),
                (self.folder / "stderr").read_text(errors="replace"),
            )
        finally:
            for name in ("stdout", "stderr"):
                (self.folder / name).unlink(missing_ok=True)
            self.folder.rmdir()


class ForkServer:
    """A server process, or a zygote of one, and a lock around its request/answer pipes."""

    def __init__(
        self,
        requests: IO[str],
        answers: IO[str],
        *,
        ends: Callable[[], None],
        process: subprocess.Popen[str] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._requests, self._answers, self._ends = requests, answers, ends
        self._process = process
        self._ready = process is not None  # a zygote says first whether its imports went well
        self._zygotes: dict[str | None, ForkServer] = {}

    @classmethod
    def launch(cls) -> ForkServer:
        process = subprocess.Popen(
            [sys.executable, __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={k: v for k, v in os.environ.items() if not k.startswith(PER_CHILD_VARIABLES)},
            text=True,
            start_new_session=True,  # Ctrl-C reaches pytest, which then ends the server
        )
        assert process.stdin is not None and process.stdout is not None

        def ends() -> None:
            process.wait(timeout=60)

        return cls(process.stdin, process.stdout, ends=ends, process=process)

    def _ask(self, request: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        if not self._ready:
            first = self._read(None)
            if "error" in first:
                raise RuntimeError(f"fork server zygote failed to import: {first['error']}")
            self._ready = True
        self._requests.write(json.dumps(request) + "\n")
        self._requests.flush()
        return self._read(timeout)

    def _read(self, timeout: float | None) -> dict[str, Any]:
        if timeout is not None and not select.select([self._answers], [], [], timeout)[0]:
            raise TimeoutError
        line = self._answers.readline()
        if not line:
            raise RuntimeError("fork server exited")
        return json.loads(line)

    def zygote(self, copy: Path | None = None) -> ForkServer:
        """A server whose children start with :data:`SCHEDULER_MODULES` imported (from
        ``copy``, an edited copy of SGLang, first when given); one per copy, ended with this
        server or by :meth:`close`. It imports while the caller goes on."""
        key = None if copy is None else str(copy)
        if key in self._zygotes:
            return self._zygotes[key]
        fifos = Path(tempfile.mkdtemp(prefix="forkserver-zygote-"))
        for name in ("requests", "answers"):
            os.mkfifo(fifos / name)
        request = {
            "copy": key,
            "modules": list(SCHEDULER_MODULES),
            "requests": str(fifos / "requests"),
            "answers": str(fifos / "answers"),
        }
        with self._lock:
            pid = self._ask({"zygote": request})["pid"]
        requests = open(fifos / "requests", "w")  # noqa: SIM115  # in the zygote's order
        answers = open(fifos / "answers")  # noqa: SIM115

        def ends() -> None:
            answers.close()
            self._zygotes.pop(key, None)
            with self._lock:
                self._ask({"wait": pid})
            shutil.rmtree(fifos)

        zygote = ForkServer(requests, answers, ends=ends)
        self._zygotes[key] = zygote
        return zygote

    def start(self, args: Sequence[str], env: Mapping[str, str] | None = None) -> Child:
        """Like ``subprocess.Popen([sys.executable, *args])`` with output captured, in the
        server's environment plus ``env`` (only ``PER_CHILD_VARIABLES``)."""
        refused = sorted(k for k in env or {} if not k.startswith(PER_CHILD_VARIABLES))
        if refused:
            raise ValueError(
                f"{', '.join(refused)}: a forked child may set only variables starting with "
                f"{', '.join(PER_CHILD_VARIABLES)}; SGLang may read others while it is "
                "imported, so run this test in a plain subprocess"
            )
        # the test's name, and where this session keeps evidence records (test/conftest.py)
        kept = ("PYTEST_CURRENT_TEST", RECORDS_ENV)
        own = {k: v for k, v in os.environ.items() if k in kept}
        folder = Path(tempfile.mkdtemp(prefix="forkserver-"))
        request = {
            "args": list(args),
            "env": {**own, **(env or {})},
            "cwd": os.getcwd(),
            "stdout": str(folder / "stdout"),
            "stderr": str(folder / "stderr"),
        }
        with self._lock:
            answer = self._ask({"start": request})
        return Child(self, list(args), answer["pid"], folder)

    def _wait(self, pid: int, timeout: float) -> int:
        with self._lock:
            try:
                return self._ask({"wait": pid}, timeout)["returncode"]
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                self._answers.readline()  # the server's answer for the killed child
                raise

    def close(self) -> None:
        """End the server (its zygotes first); children still running are killed."""
        for zygote in list(self._zygotes.values()):
            zygote.close()
        if not self._requests.closed:
            self._requests.close()
            self._ends()

    def kill(self) -> None:
        """End the server process at once (one started ahead of need, without zygotes)."""
        if self._process is not None:
            self._process.kill()
        self._zygotes.clear()
        self.close()


_server: ForkServer | None = None


def server() -> ForkServer:
    """The session's fork server, started on first use and ended when Python exits."""
    global _server
    if _server is None:
        _server = ForkServer.launch()
        atexit.register(_server.close)
    return _server


def discard() -> None:
    """Kill the server started ahead of need (it may still be importing) when nothing uses it."""
    global _server
    if _server is not None:
        atexit.unregister(_server.close)
        _server.kill()
        _server = None


def used_by(module: object) -> bool:
    """Whether a test module calls the fork server (binds :func:`server`, :func:`run_python`
    or :func:`run_cli`)."""
    return any(value in (server, run_python, run_cli) for value in vars(module).values())


def run_python(
    args: Sequence[str], env: Mapping[str, str] | None = None, *, timeout: float
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([sys.executable, *args], capture_output=True, text=True)``, forked;
    ``env`` sets ``PER_CHILD_VARIABLES`` only."""
    return server().start(args, env).wait(timeout)


def run_cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m sglang_nvfp4_patches ARGS`` in a process forked from the zygote: SGLang's
    scheduler modules imported, no plugin loaded yet."""
    command = ["-m", "sglang_nvfp4_patches", *args]
    return server().zygote().start(command, env).wait(timeout=300)


_once: dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], Any] = {}


def run_cli_once(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """:func:`run_cli`, run once per session for the same arguments and environment: for a
    command that only reads (``verify`` takes half a minute) and that several tests read."""
    key = (args, tuple(sorted(env.items())))
    if key not in _once:
        _once[key] = run_cli(*args, **env)
    return _once[key]


def json_lines(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects a command printed, one per line (``explain --json``)."""
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


if __name__ == "__main__":
    serve()
