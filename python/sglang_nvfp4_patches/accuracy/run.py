"""``accuracy run``: ask a running server every question, keep answers safe, write RUN.json.

Each answer is appended to the partial JSONL at once, so a rerun only asks what is missing,
and never drops a stored answer (:func:`plan_resume`). Callers hold ``run_file_lock``.
Requests go to SGLang's ``/generate`` or OpenAI's ``/v1/completions``: connection failures,
timeouts and HTTP 5xx are retried with backoff; a 4xx or bad 200 is not.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import enum
import http.client
import inspect
import json
import random
import sys
import time
import urllib.request
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from sglang_nvfp4_patches.accuracy.dataset import EvalItem, load_eval_items, open_source
from sglang_nvfp4_patches.accuracy.errors import ConfigError, ResumeError
from sglang_nvfp4_patches.accuracy.limits import ABORT_AFTER_CONSECUTIVE_FAILURES, url_problem
from sglang_nvfp4_patches.accuracy.scoring import make_record, score_by_subject
from sglang_nvfp4_patches.accuracy.store import (
    RUN_FORMAT,
    RUN_VERSION,
    PartialWriter,
    Record,
    ensure_output_file,
    load_finished_run,
    load_partial,
    partial_path,
    write_json_atomic,
)
from sglang_nvfp4_patches.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_SERVER, loads_json
from sglang_nvfp4_patches.interrupts import python_ctrl_c, until_stop_request
from sglang_nvfp4_patches.progress import Progress, progress_bar
from sglang_nvfp4_patches.streams import printable

# Seconds to wait for the server to name its model before the first question.
_MODEL_PROBE_S = 10.0
# Where the question set of a run comes from, by RUN.json key: what a rerun must not shrink.
SCOPE_OPTIONS = {"data_dir": "--data", "subjects": "--subjects", "limit": "--limit"}
_JSON_HEADERS = {"Content-Type": "application/json"}
_BODY_SNIPPET_CHARS = 200


class Api(str, enum.Enum):
    NATIVE = "native"  # SGLang /generate
    OPENAI = "openai"  # OpenAI-compatible /v1/completions


class Failure(str, enum.Enum):
    """What went wrong with a request, as a report words the cause of many failures."""

    CONNECTION = "no connection to the server could be made: is it up, at that --base-url?"
    TIMEOUT = "every request timed out: is the server overloaded or stuck? (--timeout)"
    SERVER_ERROR = "the server is up but answers with HTTP 5xx errors: see its log"
    REJECTED = "the server is up but rejects the requests (HTTP 4xx): check --api and --model"
    BAD_REPLY = "the server is up but its replies are not completions: check --api and --base-url"


# What another attempt may help with: no answer at all, or a server error (HTTP 5xx).
_RETRIED = (Failure.CONNECTION, Failure.TIMEOUT, Failure.SERVER_ERROR)


class RequestFailedError(Exception):
    """A request failed: ``kind`` says how."""

    def __init__(self, message: str, kind: Failure) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class RunConfig:
    """Everything ``accuracy run`` needs (the command line has checked the numbers)."""

    base_url: str
    data_dir: str | Path  # an MMLU csv folder or a Hugging Face dataset id (cais/mmlu)
    out: Path
    api: Api = Api.NATIVE
    model: str = "default"
    shots: int = 5
    max_new_tokens: int = 2
    parallel: int = 64
    subjects: tuple[str, ...] | None = None
    limit: int | None = None
    timeout_s: float = 120.0
    max_retries: int = 3
    backoff_s: float = 0.5
    progress: bool | None = None  # None: show a progress bar only when stderr is a terminal
    server: Mapping[str, str] | None = None  # model path and flags, when ab started the server

    def __post_init__(self) -> None:
        problem = url_problem(self.base_url)
        if problem is not None:
            raise ConfigError(f"--base-url {self.base_url!r} {problem}")

    def settings(self) -> dict[str, Any]:
        """What shapes prompts and answers; must match for stored answers to be reused."""
        return {
            "api": self.api.value,
            "model": self.model if self.api is Api.OPENAI else None,
            "shots": self.shots,
            "max_new_tokens": self.max_new_tokens,
            "server": dict(self.server) if self.server is not None else None,
        }

    def load_items(self) -> list[EvalItem]:
        return load_eval_items(open_source(self.data_dir), self.shots, self.subjects, self.limit)

    def scope(self, items: Sequence[EvalItem]) -> dict[str, Any]:
        """The question set of ``items`` as RUN.json records it (keys of SCOPE_OPTIONS)."""
        return {
            "data_dir": str(self.data_dir),
            "subjects": list(dict.fromkeys(item.question.subject for item in items)),
            "limit": self.limit,
        }


@dataclass
class RunOutcome:
    """What happened, tallied by the workers; ``run`` is RUN.json's content (None: interrupted)."""

    partial: Path
    resumed: int
    run: dict[str, Any] | None = None
    records: dict[str, Record] = field(default_factory=dict)  # answered by this run
    failures: list[tuple[str, str]] = field(default_factory=list)
    not_attempted: int = 0
    consecutive_failures: int = 0
    aborted: bool = False
    interrupted: bool = False
    abort_cause: Failure | None = None  # what the failures that stopped the run were
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0, 3 (the server did not answer every question) or 130 (interrupted)."""
        if self.interrupted:
            return EXIT_INTERRUPTED
        return EXIT_SERVER if self.failures or self.not_attempted else EXIT_OK


@dataclass(frozen=True)
class ResumePlan:
    """What a run does with what earlier runs of its ``out`` stored."""

    done: dict[str, Record]  # every stored answer by id, this run's questions or not
    meta: Mapping[str, Any]  # what the stored file records (partial header, else RUN.json)
    source: Path  # the file the answers are read from first, for messages
    todo: list[EvalItem]  # this run's questions without a stored answer
    has_partial: bool
    subset_note: str | None  # set when stored answers go beyond this run: it writes nothing
    notes: tuple[str, ...]  # what reading the stored files left out (NOTE lines)
    writes: bool  # RUN.json: not for a subset, nor when it holds these answers already


def plan_resume(config: RunConfig, items: Sequence[EvalItem]) -> ResumePlan:
    """Stored answers of ``config.out`` against ``items``; ResumeError when unusable."""
    settings = config.settings()
    ppath = partial_path(config.out)
    partial = load_partial(ppath, settings)
    finished = load_finished_run(config.out, settings)
    has_partial = ppath.exists()
    source = ppath if has_partial else config.out
    done: dict[str, Record] = {}
    for record in [*partial.records, *finished.records]:
        done.setdefault(record["id"], record)  # first wins
    for item in items:  # a changed answer key means the data changed
        if item.id in done and done[item.id]["answer"] != item.question.answer:
            raise ResumeError(
                f"{source}: stored answer key for {item.id} is {done[item.id]['answer']}, the "
                f"data now says {item.question.answer}; the data changed, so delete {source} "
                "(or write to another --out) to start over"
            )
    meta = partial.meta or finished.meta
    todo = [item for item in items if item.id not in done]
    asked = {item.id for item in items}
    outside = [qid for qid in done if qid not in asked]
    note = None
    if outside:
        changed = _scope_changes(meta, config.scope(items)) or f"e.g. {outside[0]}"
        if todo:
            raise ResumeError(
                f"{source} holds {len(outside)} stored answer(s) to questions this run does not "
                f"ask ({changed}) and this run has {len(todo)} question(s) still to ask: "
                f"finishing it would rewrite {config.out} without those answers. Rerun with the "
                "options they were stored with, or write to another --out (--out-dir for ab)"
            )
        note = (
            f"NOTE: {source} holds {len(done)} stored answers; this run ({changed}) asks "
            f"{len(items)} of them, all answered already: it reports on those {len(items)} and "
            "leaves the stored files as they are"
        )
    notes = (*partial.notes, *finished.notes)
    writes = note is None and (bool(todo) or has_partial or not config.out.exists())
    return ResumePlan(done, meta, source, todo, has_partial, note, notes, writes)


def _scope_changes(stored: Mapping[str, Any], now: Mapping[str, Any]) -> str:
    """``--limit: stored 30, now 15; ...`` for the question-set options that differ."""

    def text(value: object) -> str:
        if value is None:
            return "all"
        if isinstance(value, list):
            shown = ",".join(map(str, value[:4]))
            return shown if len(value) <= 4 else f"{len(value)} subjects ({shown},...)"
        return str(value)

    return "; ".join(
        f"{option}: stored {text(stored[key])}, now {text(now[key])}"
        for key, option in SCOPE_OPTIONS.items()
        if key in stored and stored[key] != now[key]
    )


def check_endpoint(config: RunConfig, plan: ResumePlan) -> tuple[dict[str, Any], list[str]]:
    """Endpoint fields to record and NOTE lines; refuses a server with another model."""
    stored_url, stored_model = plan.meta.get("base_url"), plan.meta.get("served_model")
    if not plan.todo:
        return {"base_url": stored_url or config.base_url, "served_model": stored_model}, []
    probe_s = min(config.timeout_s, _MODEL_PROBE_S)
    model = served_model(config.base_url, probe_s) if config.server is None else None
    endpoint = {"base_url": config.base_url, "served_model": model}
    if config.server is not None or not plan.done or stored_url is None:
        return endpoint, []
    where = f"{plan.source}: its answers came from --base-url {stored_url}"
    if stored_model and model and stored_model != model:
        raise ResumeError(
            f"{where}, whose server reported model {stored_model!r}; the server at "
            f"{config.base_url} reports {model!r}. Mixing them would mix two models in one run: "
            "rerun against the stored model, or write to another --out"
        )
    if stored_url == config.base_url:
        return endpoint, []
    if stored_model and model == stored_model:
        return endpoint, [
            f"NOTE: the stored answers came from {stored_url}; this run asks {config.base_url}, "
            f"whose server reports the same model ({model}): resuming"
        ]
    why = (
        "the stored answers do not record their server's model"
        if not stored_model
        else "the server there does not name its model (GET /get_model_info)"
    )
    raise ResumeError(
        f"{where}, this run asks {config.base_url}, and {why}, so the new answers could come "
        f"from another model: rerun with --base-url {stored_url}, or write to another --out"
    )


def run_accuracy(
    config: RunConfig, items: Sequence[EvalItem], say: Callable[[str], None]
) -> RunOutcome:
    """Evaluate, resuming earlier answers; write RUN.json atomically (``plan.writes``)."""
    ensure_output_file(config.out, "--out")
    plan = plan_resume(config, items)
    endpoint, notes = check_endpoint(config, plan)
    for note in plan.notes:
        say(note)
    if plan.subset_note is not None:
        notes.insert(0, plan.subset_note)
    ppath = partial_path(config.out)
    done = dict(plan.done)
    outcome = RunOutcome(ppath, resumed=len(items) - len(plan.todo), notes=notes)

    started = _utc_now()
    start = time.perf_counter()
    if plan.todo:
        header = {**config.settings(), **endpoint, **config.scope(items)}
        writer = PartialWriter(ppath, header, done.values())
        progress = progress_bar(len(items), "q", show=config.progress, initial=outcome.resumed)
        try:
            _run_coroutine(_evaluate(config, plan.todo, writer, outcome, progress))
        except KeyboardInterrupt:
            outcome.interrupted = True
        finally:
            progress.close()
            writer.close()
            if not (plan.has_partial or done or outcome.records):
                ppath.unlink(missing_ok=True)  # made by this run, it holds no answer
    wall = time.perf_counter() - start
    outcome.not_attempted = len(plan.todo) - len(outcome.records) - len(outcome.failures)
    if outcome.interrupted:
        return outcome
    done.update(outcome.records)
    records = [done[item.id] for item in items if item.id in done]
    outcome.run = _run_document(config, items, records, outcome, started, wall, endpoint)
    if plan.writes and records:  # no file is written to hold no answer
        write_json_atomic(config.out, outcome.run)
        if outcome.exit_code == EXIT_OK:
            ppath.unlink(missing_ok=True)  # RUN.json now holds every stored answer
    return outcome


async def _evaluate(
    config: RunConfig,
    todo: Sequence[EvalItem],
    writer: PartialWriter,
    outcome: RunOutcome,
    progress: Progress,
) -> None:
    """Run ``parallel`` workers over one session until the questions are used up."""
    workers = min(config.parallel, len(todo))
    connector = aiohttp.TCPConnector(limit=workers, ttl_dns_cache=300)
    rng = random.Random()
    async with aiohttp.ClientSession(connector=connector) as session:
        queue = iter(todo)

        async def worker() -> None:
            for item in queue:
                if outcome.aborted:
                    return
                try:
                    output = await _ask(session, config, item.prompt, rng)
                except RequestFailedError as exc:
                    outcome.failures.append((item.id, str(exc)))
                    outcome.consecutive_failures += 1
                    if outcome.consecutive_failures >= ABORT_AFTER_CONSECUTIVE_FAILURES:
                        outcome.aborted = True
                        outcome.abort_cause = exc.kind
                    continue
                outcome.consecutive_failures = 0
                record = make_record(item, output)
                writer.append(record)
                outcome.records[item.id] = record
                progress.update(1)

        tasks = [asyncio.ensure_future(worker()) for _ in range(workers)]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def _run_document(
    config: RunConfig,
    items: Sequence[EvalItem],
    records: list[Record],
    outcome: RunOutcome,
    started: str,
    wall: float,
    endpoint: Mapping[str, Any],
) -> dict[str, Any]:
    """The RUN.json content: metadata, summary and one record per answered question."""
    correct = sum(record["correct"] for record in records)
    return {
        "format": RUN_FORMAT,
        "version": RUN_VERSION,
        **config.settings(),
        **endpoint,
        **config.scope(items),
        "parallel": config.parallel,
        "timeout_s": config.timeout_s,
        "max_retries": config.max_retries,
        "started_at": started,
        "finished_at": _utc_now(),
        "wall_time_s": round(wall, 3),
        "answered_this_run": len(outcome.records),
        "resumed": outcome.resumed,
        "questions_per_s": round(len(outcome.records) / wall, 2) if wall > 0 else None,
        "n_questions": len(items),
        "n_answered": len(records),
        "n_failed": len(outcome.failures),
        "n_not_attempted": outcome.not_attempted,
        "aborted": outcome.aborted,
        "first_error": (
            f"{outcome.failures[0][0]}: {outcome.failures[0][1]}" if outcome.failures else None
        ),
        "failed_ids": [qid for qid, _ in outcome.failures],
        "complete": len(records) == len(items),
        "accuracy": correct / len(records) if records else None,
        "per_subject": score_by_subject(records),
        "records": records,
    }


def _run_coroutine(coro: Coroutine[Any, Any, None]) -> None:
    """Run on uvloop when installed: it cuts the per-request CPU cost at high --parallel."""
    main = until_stop_request(coro)
    loop: asyncio.AbstractEventLoop | None = None
    try:
        try:
            import uvloop
        except ImportError:
            uvloop = None
        with python_ctrl_c():  # asyncio's own Ctrl-C handling cancels the main task
            if uvloop is None or sys.version_info < (3, 11):
                stopped = asyncio.run(main)
            else:
                loop = uvloop.new_event_loop()
                with asyncio.Runner(loop_factory=lambda: loop) as runner:
                    stopped = runner.run(main)
    finally:
        if loop is not None and not loop.is_closed():  # a stop before the runner took it
            loop.close()
        for created in (main, coro):  # a stop before they ran: not warned of as never awaited
            if inspect.getcoroutinestate(created) == inspect.CORO_CREATED:
                created.close()
    if stopped:
        raise KeyboardInterrupt


def _utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def backoff_delay(retry: int, base_s: float, rng: random.Random, max_s: float = 10.0) -> float:
    """base * 2^retry, at most ``max_s``, with equal jitter: workers failing together (a
    restart) do not retry in lockstep."""
    step = min(max_s, base_s * 2.0 ** min(retry, 64))
    return step / 2 + rng.uniform(0, step / 2)


def endpoint_url(base_url: str, api: Api) -> str:
    """Full URL for ``api``; an OpenAI-style base URL ending in ``/v1`` is accepted too."""
    base = base_url.rstrip("/")
    return f"{base}/generate" if api is Api.NATIVE else f"{base.removesuffix('/v1')}/v1/completions"


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


async def _ask(
    session: aiohttp.ClientSession, config: RunConfig, prompt: str, rng: random.Random
) -> str:
    """Generated text for ``prompt``; raises RequestFailedError once retries are spent."""
    body = request_body(config.api, prompt, config.max_new_tokens, config.model)
    retry = 0
    while True:
        try:
            return await _attempt(session, config, body)
        except RequestFailedError as exc:
            if exc.kind not in _RETRIED:
                raise RequestFailedError(f"{exc} (not retried)", exc.kind) from None
            if retry >= config.max_retries:
                message = f"{exc} (gave up after {retry + 1} attempt(s))"
                raise RequestFailedError(message, exc.kind) from None
        await asyncio.sleep(backoff_delay(retry, config.backoff_s, rng))
        retry += 1


async def _attempt(session: aiohttp.ClientSession, config: RunConfig, body: bytes) -> str:
    """One POST, with the failure classified as retryable or permanent."""
    url = endpoint_url(config.base_url, config.api)
    try:
        timeout = aiohttp.ClientTimeout(total=config.timeout_s)
        async with session.post(url, data=body, headers=_JSON_HEADERS, timeout=timeout) as resp:
            status = resp.status
            raw = await resp.read()
    except asyncio.TimeoutError:
        message = f"timed out after {config.timeout_s:g} s"
        raise RequestFailedError(message, Failure.TIMEOUT) from None
    except aiohttp.ClientError as exc:
        message = f"{type(exc).__name__}: {exc}"
        raise RequestFailedError(message, Failure.CONNECTION) from None
    if status >= 500:
        raise RequestFailedError(f"HTTP {status}: {_snippet(raw)}", Failure.SERVER_ERROR)
    if status >= 400:
        message = f"HTTP {status} from {url}: {_snippet(raw)}"
        raise RequestFailedError(message, Failure.REJECTED)
    if status != 200:
        message = f"unexpected HTTP {status} from {url}: {_snippet(raw)}"
        raise RequestFailedError(message, Failure.BAD_REPLY)
    try:
        return response_text(config.api, raw)
    except (ValueError, UnicodeDecodeError) as exc:
        message = f"bad response from {url}: {exc}: {_snippet(raw)}"
        raise RequestFailedError(message, Failure.BAD_REPLY) from None
