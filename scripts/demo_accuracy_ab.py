#!/usr/bin/env python3
"""See ``accuracy ab`` end to end without a GPU: a DEMO, not a measurement.

    .venv/bin/python scripts/demo_accuracy_ab.py            # writes demo-accuracy-ab/

It writes a synthetic MMLU-format question set (subjects ``demo_*``, questions that say they
are synthetic) and an answer key, then runs the real ``accuracy ab`` with this same file as
``--launcher``: instead of SGLang it starts a scripted stand-in server (standard library only)
that answers from the key, and answers a fixed share of questions wrong when started with
``--attention-backend trtllm_mha``. So you see every step ab takes (servers started and
stopped, answers stored, the McNemar verdict) in a few seconds. The numbers measure nothing:
every line this script prints, the model path and each server log say DEMO. It exits with
ab's status: 1 ("B is significantly worse"), by design, since the stand-in's B answers worse.
Its own failures are one ``error:`` line and never 1: 2 for a bad option (an --out-dir it
cannot write, a stand-in port or answer key it cannot use), 130 when stopped. Ctrl-C, SIGTERM
or SIGHUP is handed on to ab, once, which stops its servers and says what it kept.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shlex
import signal
import stat
import subprocess
import sys
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

BANNER = "DEMO: scripted stand-in server, not SGLang, no GPU; these numbers measure nothing"
SUBJECTS = {"demo_algebra": 40, "demo_anatomy": 40, "demo_physics": 40}
LETTERS = "ABCD"
KEY_LIMIT = 16 * 2**20  # bytes: the demo's key is a few KiB
EXIT_USAGE = 2  # as the tool's: bad input
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
MARKER = re.compile(r"\[(demo_\w+/\d+)\]")


def _letter(qid: str, salt: str) -> str:
    return LETTERS[zlib.crc32(f"{salt}:{qid}".encode()) % 4]


def write_demo_data(root: Path) -> tuple[Path, Path]:
    """``root/mmlu`` (dev/ and test/ csv files) and ``root/DEMO-answer-key.json``."""
    key: dict[str, str] = {}
    for subject, count in SUBJECTS.items():
        for split, n in (("dev", 5), ("test", count)):
            folder = root / "mmlu" / split
            folder.mkdir(parents=True, exist_ok=True)
            with (folder / f"{subject}_{split}.csv").open("w", newline="") as handle:
                writer = csv.writer(handle)
                for index in range(n):
                    qid = f"{subject}/{index}"
                    answer = _letter(qid, split)
                    if split == "test":
                        key[qid] = answer
                    writer.writerow(
                        [f"[{qid}] Synthetic demo question {index}, not MMLU.", *LETTERS, answer]
                    )
    model = root / "DEMO-answer-key.json"
    model.write_text(json.dumps(key))
    return root / "mmlu", model


def _reply(key: dict[str, str], prompt: str, backend: str) -> str:
    """The right letter, except for a fixed share of questions: 1 in 8 on every backend, and
    1 in 4 more with trtllm_mha (the stand-in's scripted 'bad backend')."""
    found = MARKER.findall(prompt)
    if not found or found[-1] not in key:
        return " A"
    qid = found[-1]
    right = key[qid]
    wrong = LETTERS[(LETTERS.index(right) + 1) % 4]
    draw = zlib.crc32(qid.encode()) % 8
    if draw == 0 or (backend == "trtllm_mha" and draw in (1, 2)):
        return f" {wrong}"
    return f" {right}"


class DemoError(Exception):
    """Bad input to the demo: one ``error:`` line, exit 2."""


def _port(text: str) -> int:
    """argparse type: a TCP port, 1-65535."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (1-65535)")
    return port


def read_key(path: Path) -> dict[str, str]:
    """The answer key ``write_demo_data`` wrote: a JSON object, question id to letter, read
    from a regular file of at most KEY_LIMIT bytes (never a device that never ends)."""
    where = f"--model-path {path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise DemoError(f"{where}: cannot open ({exc.strerror}); {_KEY_HINT}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DemoError(f"{where}: not a regular file; {_KEY_HINT}")
        raw = handle.read(KEY_LIMIT + 1)
    if len(raw) > KEY_LIMIT:
        raise DemoError(f"{where}: larger than {KEY_LIMIT >> 20} MiB; {_KEY_HINT}")
    try:
        key = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise DemoError(f"{where}: not a JSON answer key; {_KEY_HINT}") from None
    if not isinstance(key, dict) or not all(
        isinstance(qid, str) and answer in LETTERS for qid, answer in key.items()
    ):
        raise DemoError(
            f"{where}: not an answer key (a JSON object of question id to A-D); {_KEY_HINT}"
        )
    return key


_KEY_HINT = "give the DEMO-answer-key.json the demo wrote in its --out-dir"


def serve(argv: list[str]) -> None:
    """The stand-in: SGLang's launcher flags in, ``/health`` and ``/generate`` out."""
    parser = argparse.ArgumentParser(prog="demo stand-in server")
    parser.add_argument("--model-path", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=_port, required=True)
    parser.add_argument("--attention-backend", default="auto")
    args, ignored = parser.parse_known_args(argv)
    key = read_key(args.model_path)
    print(BANNER, flush=True)
    print(f"attention backend {args.attention_backend}; ignored flags {ignored}", flush=True)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the client expects of SGLang

        def do_GET(self) -> None:
            self._send(200 if self.path == "/health" else 404, {})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path != "/generate":
                self._send(404, {"error": "the demo speaks only the native /generate"})
                return
            self._send(200, {"text": _reply(key, body["text"], args.attention_backend)})

        def _send(self, status: int, data: dict) -> None:
            raw = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *_: object) -> None:
            return None

    class Server(ThreadingHTTPServer):
        request_queue_size = 256  # the client opens --parallel connections at once
        daemon_threads = True

    try:
        server = Server((args.host, args.port), Handler)
    except OSError as exc:
        raise DemoError(f"cannot listen on {args.host}:{args.port} ({exc.strerror})") from None
    try:
        server.serve_forever()
    except KeyboardInterrupt:  # ab stops its servers with SIGINT, as SGLang expects
        print("DEMO stand-in server stopped", flush=True)


def run_ab(command: list[str]) -> int:
    """ab's exit status. ab runs in a process group of its own, so a Ctrl-C in the terminal
    reaches it once, from here; each stop request this process gets is handed on, and ab,
    never killed, stops its servers itself."""
    started: list[subprocess.Popen[bytes]] = []
    arrived: list[int] = []  # before ab had a pid

    def hand_on(signum: int, frame: object) -> None:
        if started:
            started[0].send_signal(signum)
        else:
            arrived.append(signum)

    stops = [signal.SIGTERM, signal.SIGHUP]
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # a script's background job
        stops.append(signal.SIGINT)
    previous = {stop: signal.signal(stop, hand_on) for stop in stops}
    try:
        started.append(subprocess.Popen(command, start_new_session=True))
        for signum in arrived:
            started[0].send_signal(signum)
        code = started[0].wait()
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)
    return 128 - code if code < 0 else code


def demo(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        serve(argv[1:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=Path("demo-accuracy-ab"))
    args = parser.parse_args(argv)
    try:
        data, model = write_demo_data(args.out_dir)
    except OSError as exc:
        where = exc.filename or args.out_dir
        raise DemoError(
            f"--out-dir {args.out_dir}: cannot write {where} ({exc.strerror}); choose a "
            "directory that can be written"
        ) from None
    command = [
        *(sys.executable, "-m", "sglang_nvfp4_patches", "accuracy", "ab"),
        *("--model-path", str(model), "--data", str(data), "--out-dir", str(args.out_dir)),
        *("--a-args", "--attention-backend triton"),
        *("--b-args", "--attention-backend trtllm_mha"),
        *("--launcher", shlex.join([sys.executable, str(Path(__file__).resolve()), "serve"])),
        *("--startup-timeout", "30", "--stop-grace", "5"),
    ]
    print(BANNER, file=sys.stderr)
    print(f"running: {shlex.join(command)}", file=sys.stderr)
    code = run_ab(command)
    print(BANNER, file=sys.stderr)
    return code


def main() -> int:
    """One ``error:`` line (exit 2) for bad input, one line (exit 130) when stopped before ab
    runs; never a traceback."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # nohup's choice stays
        signal.signal(signal.SIGHUP, signal.default_int_handler)
    try:
        return demo(sys.argv[1:])
    except DemoError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:  # never 1 ("B is worse"), never a traceback
        print(
            f"internal error: {type(error).__name__}: {error}; a bug of the demo", file=sys.stderr
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
