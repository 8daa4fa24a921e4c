"""A scripted stand-in for an SGLang server, on 127.0.0.1 in a background thread.

It speaks ``POST /generate`` (native), ``POST /v1/completions`` (OpenAI) and ``GET /health``,
rejects request bodies of the wrong shape with 400, answers each question from a table keyed
by question id, and can misbehave per question: HTTP 503 for the first N calls, drop the
connection without a response, or answer slowly. It counts every call per question id so
tests can check what the client asked and how often.

Run as a program (``python -m accuracy_support.fake_server``) it is a test launcher for
``accuracy ab``: it takes SGLang's ``--model-path M --host H --port P`` plus
``--attention-backend NAME``, where the "model" is a JSON answer key ``{id: letter}``, and
answers according to its flags (see :func:`fake_model_is_right`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from accuracy_support.dataset_writer import question_id_in, wrong_letter


@dataclass
class Script:
    """How the server treats each question id; mutable between runs of one test."""

    replies: dict[str, str]
    fail_503: dict[str, int] = field(default_factory=dict)  # first N calls -> 503
    drop: dict[str, int] = field(default_factory=dict)  # first N calls -> connection closed
    slow: dict[str, tuple[int, float]] = field(default_factory=dict)  # first N calls sleep S
    reject: dict[str, int] = field(default_factory=dict)  # id -> 4xx status on every call
    garbage: set[str] = field(default_factory=set)  # ids answered 200 with an HTML page
    delay_s: float = 0.0  # every answer waits this long
    model: str = "default"  # the model name /v1/completions accepts
    model_path: str | None = None  # what GET /get_model_info names (None: 404, as non-SGLang)


class FakeServer:
    """Start with ``with FakeServer(script) as server:``; ``server.url`` is the base URL."""

    def __init__(
        self, script: Script, host: str = "127.0.0.1", port: int = 0, healthy: bool = True
    ) -> None:
        self.script = script
        self.healthy = healthy  # GET /health: 200, else 503 (a server that never gets ready)
        self._address = (host, port)
        self.calls: Counter[str] = Counter()  # all attempts per question id
        self.answered: Counter[str] = Counter()  # 200 responses per question id
        self.bad_requests: list[str] = []  # 400s for malformed bodies (client bugs)
        self.prompts: dict[str, str] = {}  # last prompt seen per question id
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.url = ""

    def __enter__(self) -> FakeServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def snapshot_calls(self) -> Counter[str]:
        with self._lock:
            return Counter(self.calls)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/generate", self._generate)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_get("/health", self._health)
        app.router.add_get("/get_model_info", self._model_info)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(self._address)
        site = web.SockSite(self._runner, sock)
        await site.start()
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.healthy else 503)

    async def _model_info(self, request: web.Request) -> web.Response:
        if self.script.model_path is None:
            return web.Response(status=404)
        return web.json_response({"model_path": self.script.model_path, "is_generation": True})

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        params = body.get("sampling_params") if isinstance(body, dict) else None
        if not (
            isinstance(params, dict)
            and isinstance(body.get("text"), str)
            and params.get("temperature") == 0
            and isinstance(params.get("max_new_tokens"), int)
        ):
            return self._bad_request(f"/generate: unexpected body {body!r}")
        return await self._answer(request, body["text"], native=True)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if not (
            isinstance(body, dict)
            and body.get("model") == self.script.model
            and isinstance(body.get("prompt"), str)
            and body.get("temperature") == 0
            and isinstance(body.get("max_tokens"), int)
        ):
            return self._bad_request(f"/v1/completions: unexpected body {body!r}")
        return await self._answer(request, body["prompt"], native=False)

    def _bad_request(self, message: str) -> web.Response:
        with self._lock:
            self.bad_requests.append(message)
        return web.json_response({"error": message}, status=400)

    async def _answer(self, request: web.Request, prompt: str, native: bool) -> web.StreamResponse:
        qid = question_id_in(prompt)
        script = self.script
        if qid is None or qid not in script.replies:
            return self._bad_request(f"no known question id in prompt {prompt[-80:]!r}")
        with self._lock:
            self.calls[qid] += 1
            call = self.calls[qid]
            self.prompts[qid] = prompt
        if qid in script.reject:
            return web.json_response({"error": "rejected"}, status=script.reject[qid])
        if qid in script.garbage:
            return web.Response(text="<html>not an API</html>", content_type="text/html")
        if call <= script.fail_503.get(qid, 0):
            return web.json_response({"error": "overloaded"}, status=503)
        if call <= script.drop.get(qid, 0):
            return await _drop_connection(request)
        slow_calls, slow_s = script.slow.get(qid, (0, 0.0))
        if call <= slow_calls:
            await asyncio.sleep(slow_s)
        if script.delay_s:
            await asyncio.sleep(script.delay_s)
        text = script.replies[qid]
        with self._lock:
            self.answered[qid] += 1
        payload: dict[str, Any]
        if native:
            payload = {"text": text, "meta_info": {"id": qid, "completion_tokens": 1}}
        else:
            payload = {"id": qid, "object": "text_completion", "choices": [{"text": text}]}
        return web.json_response(payload)


async def _drop_connection(request: web.Request) -> web.StreamResponse:
    """Close the socket without sending a status line, like a crashing server would."""
    transport = request.transport
    if transport is not None:
        transport.abort()
    raise asyncio.CancelledError


# --- the test launcher for ``accuracy ab`` -------------------------------------------------

BASE_WRONG_PERCENT = 30  # every backend gets these questions wrong
DEGRADED_EXTRA_PERCENT = 15  # the degraded backend also gets these wrong


def fake_model_is_right(qid: str, backend: str, degraded_backend: str | None) -> bool:
    """Whether the fake model answers ``qid`` right on ``backend``: a fixed pseudo-random 30 %
    are wrong everywhere, another 15 % only on the degraded backend."""
    bucket = zlib.crc32(qid.encode()) % 100
    if bucket < BASE_WRONG_PERCENT:
        return False
    return not (
        backend == degraded_backend and bucket < BASE_WRONG_PERCENT + DEGRADED_EXTRA_PERCENT
    )


_STUCK_CHILD = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(600)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fake_server", description="test launcher for ab")
    parser.add_argument("--model-path", required=True, help="JSON answer key {id: letter}")
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--attention-backend", default="triton")
    parser.add_argument("--degrade", metavar="BACKEND", help="backend that answers worse")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds per answer")
    parser.add_argument("--startup-delay", type=float, default=0.0, help="seconds to 'load'")
    parser.add_argument("--exit-at-start", action="store_true", help="fail like a bad flag")
    parser.add_argument("--never-healthy", action="store_true", help="/health stays 503")
    parser.add_argument(
        "--stuck-child", action="store_true", help="fork a worker that ignores SIGINT"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGINT/SIGTERM, like ``python -m sglang.launch_server`` would."""
    args = _parser().parse_args(argv)
    print(f"fake server: model {args.model_path}, backend {args.attention_backend}", flush=True)
    if args.exit_at_start:
        print("fake server: scripted start failure", flush=True)
        return 1
    if args.stuck_child:  # the worker's command line names the model, so tests can find it
        subprocess.Popen([sys.executable, "-c", _STUCK_CHILD, args.model_path])
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    time.sleep(args.startup_delay)
    with open(args.model_path, encoding="utf-8") as handle:
        key: dict[str, str] = json.load(handle)
    backend, degraded = args.attention_backend, args.degrade
    replies = {
        qid: f" {letter if fake_model_is_right(qid, backend, degraded) else wrong_letter(letter)}"
        for qid, letter in key.items()
    }
    script = Script(replies=replies, delay_s=args.delay)
    with FakeServer(script, args.host, args.port, healthy=not args.never_healthy):
        print(f"fake server: listening on {args.host}:{args.port} (pid {os.getpid()})", flush=True)
        received = signal.sigwait({signal.SIGINT, signal.SIGTERM})
        print(f"fake server: {signal.Signals(received).name}, shutting down", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
