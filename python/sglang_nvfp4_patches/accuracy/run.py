"""``accuracy run``: ask a running server every question, keep answers safe, write RUN.json.

Each answer is appended to the partial JSONL at once, so a rerun only asks what is missing,
and never drops a stored answer (:func:`plan_resume`). Callers hold ``run_file_lock``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import sys
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from sglang_nvfp4_patches.accuracy.client import (
    Api,
    CompletionClient,
    Failure,
    RequestFailedError,
    RetryPolicy,
    served_model,
)
from sglang_nvfp4_patches.accuracy.dataset import EvalItem, load_eval_items
from sglang_nvfp4_patches.accuracy.errors import ConfigError, ResumeError
from sglang_nvfp4_patches.accuracy.hub import open_source
from sglang_nvfp4_patches.accuracy.limits import (
    ABORT_AFTER_CONSECUTIVE_FAILURES,
    seconds_problem,
    url_problem,
)
from sglang_nvfp4_patches.accuracy.scoring import make_record, score_by_subject, total_score
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
from sglang_nvfp4_patches.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_SERVER
from sglang_nvfp4_patches.interrupts import python_ctrl_c, until_stop_request
from sglang_nvfp4_patches.progress import Progress, progress_bar

# Seconds to wait for the server to name its model before the first question.
_MODEL_PROBE_S = 10.0
# Where the question set of a run comes from, by RUN.json key: what a rerun must not shrink.
SCOPE_OPTIONS = {"data_dir": "--data", "subjects": "--subjects", "limit": "--limit"}


@dataclass(frozen=True)
class RunConfig:
    """Everything ``accuracy run`` needs; validated on construction."""

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
        timeout = seconds_problem(self.timeout_s, False)
        backoff = seconds_problem(self.backoff_s, True)
        url = url_problem(self.base_url)
        checks = [
            (self.shots >= 0, f"--shots must be >= 0, got {self.shots}"),
            (self.max_new_tokens >= 1, f"--max-new-tokens must be >= 1, got {self.max_new_tokens}"),
            (self.parallel >= 1, f"--parallel must be >= 1, got {self.parallel}"),
            (self.limit is None or self.limit >= 1, f"--limit must be >= 1, got {self.limit}"),
            (timeout is None, f"--timeout {timeout}, got {self.timeout_s}"),
            (self.max_retries >= 0, f"--max-retries must be >= 0, got {self.max_retries}"),
            (backoff is None, f"--backoff {backoff}, got {self.backoff_s}"),
            (url is None, f"--base-url {self.base_url!r} {url}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)

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
        """The questions and prompts this run asks."""
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
    """What happened; ``run`` is the RUN.json content (None when interrupted)."""

    run: dict[str, Any] | None
    partial: Path
    answered_this_run: int
    resumed: int
    failures: list[tuple[str, str]]
    not_attempted: int
    aborted: bool
    interrupted: bool
    abort_cause: Failure | None = None  # what the failures that stopped the run were
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0, 3 (the server did not answer every question) or 130 (interrupted)."""
        if self.interrupted:
            return EXIT_INTERRUPTED
        return EXIT_SERVER if self.failures or self.not_attempted else EXIT_OK


@dataclass
class _Tally:
    """Shared between workers (single event loop thread, so no locking)."""

    records: dict[str, Record] = field(default_factory=dict)
    failures: list[tuple[str, str]] = field(default_factory=list)
    consecutive_failures: int = 0
    stop: bool = False
    abort_cause: Failure | None = None


@dataclass(frozen=True)
class ResumePlan:
    """What a run does with what earlier runs of its ``out`` stored."""

    done: dict[str, Record]  # every stored answer by id, this run's questions or not
    meta: Mapping[str, Any]  # what the stored file records (partial header, else RUN.json)
    source: Path  # the file the answers are read from first, for messages
    todo: list[EvalItem]  # this run's questions without a stored answer
    has_partial: bool
    has_run_file: bool
    subset_note: str | None  # set when stored answers go beyond this run: it writes nothing
    notes: tuple[str, ...] = ()  # what reading the stored files left out (NOTE lines)

    @property
    def writes(self) -> bool:
        """Whether the run writes RUN.json: not for a subset, nor when it holds these answers."""
        fresh = bool(self.todo) or self.has_partial or not self.has_run_file
        return self.subset_note is None and fresh


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
    return ResumePlan(done, meta, source, todo, has_partial, config.out.exists(), note, notes)


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
    config: RunConfig,
    items: Sequence[EvalItem] | None = None,
    say: Callable[[str], None] | None = None,
) -> RunOutcome:
    """Evaluate, resuming earlier answers; write RUN.json atomically (:attr:`ResumePlan.writes`)."""
    ensure_output_file(config.out, "--out")
    items = config.load_items() if items is None else items
    plan = plan_resume(config, items)
    endpoint, notes = check_endpoint(config, plan)
    if say is None:
        notes[:0] = plan.notes
    else:
        for note in plan.notes:
            say(note)
    if plan.subset_note is not None:
        notes.insert(0, plan.subset_note)
    ppath = partial_path(config.out)
    done = dict(plan.done)
    resumed = len(items) - len(plan.todo)

    started = _utc_now()
    start = time.perf_counter()
    tally = _Tally()
    interrupted = False
    if plan.todo:
        header = {**config.settings(), **endpoint, **config.scope(items)}
        writer = PartialWriter(ppath, header, done.values())
        progress = progress_bar(len(items), "q", show=config.progress, initial=resumed)
        try:
            _run_coroutine(_evaluate(config, plan.todo, writer, tally, progress))
        except KeyboardInterrupt:
            interrupted = True
        finally:
            progress.close()
            writer.close()
            if not (plan.has_partial or done or tally.records):
                ppath.unlink(missing_ok=True)  # made by this run, it holds no answer
    wall = time.perf_counter() - start

    outcome = RunOutcome(
        run=None,
        partial=ppath,
        answered_this_run=len(tally.records),
        resumed=resumed,
        failures=tally.failures,
        not_attempted=len(plan.todo) - len(tally.records) - len(tally.failures),
        aborted=tally.stop,
        interrupted=interrupted,
        abort_cause=tally.abort_cause,
        notes=notes,
    )
    if interrupted:
        return outcome
    done.update(tally.records)
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
    tally: _Tally,
    progress: Progress,
) -> None:
    """Run ``parallel`` workers over one session until the questions are used up."""
    workers = min(config.parallel, len(todo))
    connector = aiohttp.TCPConnector(limit=workers, ttl_dns_cache=300)
    async with aiohttp.ClientSession(connector=connector) as session:
        client = CompletionClient(
            session,
            base_url=config.base_url,
            api=config.api,
            model=config.model,
            max_new_tokens=config.max_new_tokens,
            timeout_s=config.timeout_s,
            retry=RetryPolicy(max_retries=config.max_retries, backoff_base_s=config.backoff_s),
        )
        queue = iter(todo)

        async def worker() -> None:
            """Take the next question, ask it, store the answer at once."""
            for item in queue:
                if tally.stop:
                    return
                try:
                    output = await client.complete(item.prompt)
                except RequestFailedError as exc:
                    tally.failures.append((item.id, str(exc)))
                    tally.consecutive_failures += 1
                    if tally.consecutive_failures >= ABORT_AFTER_CONSECUTIVE_FAILURES:
                        tally.stop = True
                        tally.abort_cause = exc.kind
                    continue
                tally.consecutive_failures = 0
                record = make_record(item, output)
                writer.append(record)
                tally.records[item.id] = record
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
    per_subject = score_by_subject(records)
    total = total_score(per_subject.values())
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
        "answered_this_run": outcome.answered_this_run,
        "resumed": outcome.resumed,
        "questions_per_s": round(outcome.answered_this_run / wall, 2) if wall > 0 else None,
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
        "accuracy": total.accuracy,
        "per_subject": {
            subject: {"n": s.n, "correct": s.correct, "accuracy": s.accuracy}
            for subject, s in per_subject.items()
        },
        "records": records,
    }


def _run_coroutine(coro: Coroutine[Any, Any, None]) -> None:
    """Run on uvloop when installed: it cuts the per-request CPU cost at high --parallel."""
    main = until_stop_request(coro)
    try:
        try:
            import uvloop
        except ImportError:
            uvloop = None
        with python_ctrl_c():  # asyncio's own Ctrl-C handling cancels the main task
            if uvloop is None or sys.version_info < (3, 11):
                stopped = asyncio.run(main)
            else:
                with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                    stopped = runner.run(main)
    finally:
        for created in (main, coro):  # a stop before they ran: not warned of as never awaited
            if inspect.getcoroutinestate(created) == inspect.CORO_CREATED:
                created.close()
    if stopped:
        raise KeyboardInterrupt


def _utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
