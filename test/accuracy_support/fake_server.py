"""A scripted stand-in for an SGLang server, on 127.0.0.1 in a background thread.

It speaks ``POST /generate`` (native) and ``POST /v1/completions`` (OpenAI), rejects request
bodies of the wrong shape with 400, answers each question from a table keyed by question id,
and can misbehave per question: HTTP 503 for the first N calls, drop the connection without
a response, or answer slowly. It counts every call per question id so tests can check what
the client asked and how often.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from accuracy_support.dataset_writer import question_id_in


@dataclass
class Script:
    """How the server treats each question id; mutable between runs of one test."""

    replies: dict[str, str]
    fail_503: dict[str, int] = field(default_factory=dict)  # first N calls -> 503
    drop: dict[str, int] = field(default_factory=dict)  # first N calls -> connection closed
    slow: dict[str, tuple[int, float]] = field(default_factory=dict)  # first N calls sleep S
    reject: dict[str, int] = field(default_factory=dict)  # id -> 4xx status on every call
    delay_s: float = 0.0  # every answer waits this long
    model: str = "default"  # the model name /v1/completions accepts


class FakeServer:
    """Start with ``with FakeServer(script) as server:``; ``server.url`` is the base URL."""

    def __init__(self, script: Script) -> None:
        self.script = script
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
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        site = web.SockSite(self._runner, sock)
        await site.start()
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

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
