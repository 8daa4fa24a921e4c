"""Async completion client for SGLang's native ``/generate`` and OpenAI ``/v1/completions``.

Connection failures, timeouts and HTTP 5xx are retried with backoff; a 4xx or bad 200 is not.
"""

from __future__ import annotations

import asyncio
import enum
import http.client
import json
import random
import urllib.request
from dataclasses import dataclass

import aiohttp

from sglang_nvfp4_patches.errors import loads_json
from sglang_nvfp4_patches.streams import printable

_JSON_HEADERS = {"Content-Type": "application/json"}
_BODY_SNIPPET_CHARS = 200


class Api(str, enum.Enum):
    """Which HTTP API of the server to call."""

    NATIVE = "native"  # SGLang /generate
    OPENAI = "openai"  # OpenAI-compatible /v1/completions


class Failure(str, enum.Enum):
    """What went wrong with a request, as a report words the cause of many failures."""

    CONNECTION = "connection"  # refused, reset or dropped: no HTTP answer at all
    TIMEOUT = "timeout"
    SERVER_ERROR = "server error"  # HTTP 5xx
    REJECTED = "rejected"  # HTTP 4xx
    BAD_REPLY = "bad reply"  # an answer that is not a completion of this API


class RequestFailedError(Exception):
    """A request failed: ``kind`` says how, ``retry`` whether another attempt may help."""

    def __init__(self, message: str, kind: Failure, retry: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry = retry


@dataclass(frozen=True)
class RetryPolicy:
    """``max_retries`` extra attempts after the first, waiting base * 2^k with jitter."""

    max_retries: int = 3
    backoff_base_s: float = 0.5
    backoff_max_s: float = 10.0

    def delay(self, retry: int, rng: random.Random) -> float:
        """Equal jitter, so workers failing together (a restart) do not retry in lockstep."""
        step = min(self.backoff_max_s, self.backoff_base_s * 2.0 ** min(retry, 64))
        return step / 2 + rng.uniform(0, step / 2)


def endpoint_url(base_url: str, api: Api) -> str:
    """Full URL for ``api``; an OpenAI-style base URL ending in ``/v1`` is accepted too."""
    base = base_url.rstrip("/")
    if api is Api.NATIVE:
        return f"{base}/generate"
    if base.endswith("/v1"):
        return f"{base}/completions"
    return f"{base}/v1/completions"


def request_body(api: Api, prompt: str, max_new_tokens: int, model: str) -> bytes:
    """Greedy request for the first few tokens after ``Answer:``."""
    if api is Api.NATIVE:
        payload: dict[str, object] = {
            "text": prompt,
            "sampling_params": {"temperature": 0, "max_new_tokens": max_new_tokens},
        }
    else:
        payload = {"model": model, "prompt": prompt, "max_tokens": max_new_tokens, "temperature": 0}
    return json.dumps(payload, ensure_ascii=False).encode()


def response_text(api: Api, raw: bytes) -> str:
    """The generated text from a 200 response; raises ValueError on an unexpected shape."""
    data = loads_json(raw)
    if api is Api.NATIVE:
        text = data.get("text") if isinstance(data, dict) else None
    else:
        choices = data.get("choices") if isinstance(data, dict) else None
        first = choices[0] if isinstance(choices, list) and choices else None
        text = first.get("text") if isinstance(first, dict) else None
    if not isinstance(text, str):
        expected = '"text"' if api is Api.NATIVE else '"choices"[0]."text"'
        raise ValueError(f"response JSON has no string {expected}")
    return text


def served_model(base_url: str, timeout_s: float) -> str | None:
    """The model path the server names (``GET /get_model_info``), or None when it does not."""
    base = base_url.rstrip("/").removesuffix("/v1")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"{base}/get_model_info", timeout=timeout_s) as response:
            data = loads_json(response.read(64 * 1024))
    except (OSError, ValueError, http.client.HTTPException):
        return None
    model = data.get("model_path") if isinstance(data, dict) else None
    return printable(model) if isinstance(model, str) and model else None


def _snippet(raw: bytes) -> str:
    text = printable(raw.decode("utf-8", errors="replace").strip())
    return text if len(text) <= _BODY_SNIPPET_CHARS else text[:_BODY_SNIPPET_CHARS] + "..."


class CompletionClient:
    """Sends prompts over one shared session (the caller's workers bound concurrency)."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        api: Api,
        model: str,
        max_new_tokens: int,
        timeout_s: float,
        retry: RetryPolicy,
    ) -> None:
        self._session = session
        self._api = api
        self._url = endpoint_url(base_url, api)
        self._model = model
        self._max_new_tokens = max_new_tokens
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._timeout_s = timeout_s
        self._retry = retry
        self._rng = random.Random()

    async def complete(self, prompt: str) -> str:
        """Generated text for ``prompt``; raises RequestFailedError once retries are spent."""
        body = request_body(self._api, prompt, self._max_new_tokens, self._model)
        attempts = self._retry.max_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                return await self._attempt(body)
            except RequestFailedError as exc:
                if not exc.retry:
                    raise RequestFailedError(f"{exc} (not retried)", exc.kind) from None
                if attempt >= attempts:
                    message = f"{exc} (gave up after {attempts} attempt(s))"
                    raise RequestFailedError(message, exc.kind) from None
            await asyncio.sleep(self._retry.delay(attempt - 1, self._rng))
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _attempt(self, body: bytes) -> str:
        """One POST, with the failure classified as retryable or permanent."""
        try:
            async with self._session.post(
                self._url, data=body, headers=_JSON_HEADERS, timeout=self._timeout
            ) as resp:
                status = resp.status
                raw = await resp.read()
        except asyncio.TimeoutError:
            message = f"timed out after {self._timeout_s:g} s"
            raise RequestFailedError(message, Failure.TIMEOUT, retry=True) from None
        except aiohttp.ClientError as exc:
            message = f"{type(exc).__name__}: {exc}"
            raise RequestFailedError(message, Failure.CONNECTION, retry=True) from None
        if status >= 500:
            message = f"HTTP {status}: {_snippet(raw)}"
            raise RequestFailedError(message, Failure.SERVER_ERROR, retry=True)
        if status >= 400:
            message = f"HTTP {status} from {self._url}: {_snippet(raw)}"
            raise RequestFailedError(message, Failure.REJECTED)
        if status != 200:
            message = f"unexpected HTTP {status} from {self._url}: {_snippet(raw)}"
            raise RequestFailedError(message, Failure.BAD_REPLY)
        try:
            return response_text(self._api, raw)
        except (ValueError, UnicodeDecodeError) as exc:
            message = f"bad response from {self._url}: {exc}: {_snippet(raw)}"
            raise RequestFailedError(message, Failure.BAD_REPLY) from None
