"""``accuracy run``: ask a running server every question, keep answers safe, write RUN.json.

A fixed pool of ``parallel`` workers pulls questions from one shared iterator and posts them
over one shared aiohttp session; that bounds concurrency without a task per question. Every
answer is appended to the partial JSONL as soon as it arrives, so rerunning the same command
after Ctrl-C, a crash or a server restart only asks what is still missing.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import sys
import time
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import aiohttp

from sglang_nvfp4_patches.accuracy.client import (
    Api,
    CompletionClient,
    RequestFailedError,
    RetryPolicy,
)
from sglang_nvfp4_patches.accuracy.dataset import EvalItem, load_eval_items
from sglang_nvfp4_patches.accuracy.errors import ConfigError, ResumeError
from sglang_nvfp4_patches.accuracy.scoring import make_record, score_by_subject, total_score
from sglang_nvfp4_patches.accuracy.store import (
    RUN_FORMAT,
    PartialWriter,
    Record,
    ensure_output_file,
    load_finished_run,
    load_partial,
    partial_path,
    write_json_atomic,
)
from sglang_nvfp4_patches.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK

# This many failed questions in a row (no success in between) means the server is down or
# rejects every request; asking the remaining thousands would only multiply the same error.
ABORT_AFTER_CONSECUTIVE_FAILURES = 50


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
        checks = [
            (self.shots >= 0, f"--shots must be >= 0, got {self.shots}"),
            (self.max_new_tokens >= 1, f"--max-new-tokens must be >= 1, got {self.max_new_tokens}"),
            (self.parallel >= 1, f"--parallel must be >= 1, got {self.parallel}"),
            (self.limit is None or self.limit >= 1, f"--limit must be >= 1, got {self.limit}"),
            (self.timeout_s > 0, f"--timeout must be > 0 seconds, got {self.timeout_s}"),
            (self.max_retries >= 0, f"--max-retries must be >= 0, got {self.max_retries}"),
            (self.backoff_s >= 0, f"--backoff must be >= 0 seconds, got {self.backoff_s}"),
            (
                self.base_url.startswith(("http://", "https://")),
                f"--base-url must start with http:// or https://, got {self.base_url!r}",
            ),
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
        return load_eval_items(self.data_dir, self.shots, self.subjects, self.limit)


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

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        return EXIT_FAILED if self.failures or self.not_attempted else EXIT_OK


class _Progress(Protocol):
    def update(self, n: int = 1) -> object: ...

    def close(self) -> None: ...


class _NoProgress:
    def update(self, n: int = 1) -> None:
        return None

    def close(self) -> None:
        return None


@dataclass
class _Tally:
    """Shared between workers (single event loop thread, so no locking)."""

    records: dict[str, Record] = field(default_factory=dict)
    failures: list[tuple[str, str]] = field(default_factory=list)
    consecutive_failures: int = 0
    stop: bool = False


def stored_answers(config: RunConfig, items: Sequence[EvalItem]) -> dict[str, Record]:
    """Answers an earlier run of ``config`` left for ``items``, by id; raises ResumeError when
    they come from other settings or the data changed."""
    settings = config.settings()
    ppath = partial_path(config.out)
    # An interrupted run left a partial file; a finished one only RUN.json.
    source = ppath if ppath.exists() else config.out
    carried = (
        load_partial(ppath, settings) if source == ppath else load_finished_run(source, settings)
    )
    return _check_carried(carried, items, source)


def is_finished(config: RunConfig, items: Sequence[EvalItem]) -> bool:
    """RUN.json answers every question and no partial file is pending: nothing left to ask."""
    done = stored_answers(config, items)
    return (
        config.out.exists()
        and not partial_path(config.out).exists()
        and all(item.id in done for item in items)
    )


def run_accuracy(config: RunConfig, items: Sequence[EvalItem] | None = None) -> RunOutcome:
    """Evaluate, resuming from earlier answers, and write RUN.json atomically at the end;
    ``items`` (default: ``config.load_items()``) saves reloading the data."""
    ensure_output_file(config.out, "--out")
    items = config.load_items() if items is None else items
    settings = config.settings()
    ppath = partial_path(config.out)
    done = stored_answers(config, items)
    config.out.parent.mkdir(parents=True, exist_ok=True)
    writer = PartialWriter(ppath, settings, done.values())
    todo = [item for item in items if item.id not in done]
    resumed = len(items) - len(todo)

    started = _utc_now()
    start = time.perf_counter()
    tally = _Tally()
    progress = _make_progress(config, total=len(items), initial=resumed)
    interrupted = False
    try:
        _run_coroutine(_evaluate(config, todo, writer, tally, progress))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        progress.close()
        writer.close()
    wall = time.perf_counter() - start

    outcome = RunOutcome(
        run=None,
        partial=ppath,
        answered_this_run=len(tally.records),
        resumed=resumed,
        failures=tally.failures,
        not_attempted=len(todo) - len(tally.records) - len(tally.failures),
        aborted=tally.stop,
        interrupted=interrupted,
    )
    if interrupted:
        return outcome
    done.update(tally.records)
    records = [done[item.id] for item in items if item.id in done]
    outcome.run = _run_document(config, items, records, outcome, started, wall)
    write_json_atomic(config.out, outcome.run)
    if outcome.exit_code == EXIT_OK:
        writer.remove()
    return outcome


def _check_carried(
    carried: Sequence[Record], items: Sequence[EvalItem], source: Path
) -> dict[str, Record]:
    """Earlier answers by id (first wins); a changed answer key means the data changed."""
    done: dict[str, Record] = {}
    for record in carried:
        done.setdefault(record["id"], record)
    for item in items:
        record = done.get(item.id)
        if record is not None and record["answer"] != item.question.answer:
            raise ResumeError(
                f"{source}: stored answer key for {item.id} is {record['answer']}, the data "
                f"now says {item.question.answer}; the data changed, so delete {source} "
                "(or write to another --out) to start over"
            )
    return done


async def _evaluate(
    config: RunConfig,
    todo: Sequence[EvalItem],
    writer: PartialWriter,
    tally: _Tally,
    progress: _Progress,
) -> None:
    """Run ``parallel`` workers over one session until the questions are used up."""
    if not todo:
        return
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
            rng=random.Random(),
        )
        queue = iter(todo)
        tasks = [
            asyncio.ensure_future(_worker(client, queue, writer, tally, progress))
            for _ in range(workers)
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def _worker(
    client: CompletionClient,
    queue: Iterator[EvalItem],
    writer: PartialWriter,
    tally: _Tally,
    progress: _Progress,
) -> None:
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
            continue
        tally.consecutive_failures = 0
        record = make_record(item, output)
        writer.append(record)
        tally.records[item.id] = record
        progress.update(1)


def _run_document(
    config: RunConfig,
    items: Sequence[EvalItem],
    records: list[Record],
    outcome: RunOutcome,
    started: str,
    wall: float,
) -> dict[str, Any]:
    """The RUN.json content: metadata, summary and one record per answered question."""
    per_subject = score_by_subject(records)
    total = total_score(per_subject.values())
    return {
        "format": RUN_FORMAT,
        "version": 1,
        **config.settings(),
        "base_url": config.base_url,
        "data_dir": str(config.data_dir),
        "subjects": list(dict.fromkeys(item.question.subject for item in items)),
        "limit": config.limit,
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


def _make_progress(config: RunConfig, total: int, initial: int) -> _Progress:
    """A tqdm bar on an interactive terminal only; logs and CI stay quiet."""
    show = sys.stderr.isatty() if config.progress is None else config.progress
    if not show:
        return _NoProgress()
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="q", file=sys.stderr, mininterval=0.5)


def _run_coroutine(coro: Coroutine[Any, Any, None]) -> None:
    """Run on uvloop when it is installed (SGLang ships it): it cuts the client's per-request
    CPU cost, which is what limits throughput at --parallel 512 on a small host."""
    try:
        import uvloop
    except ImportError:
        uvloop = None
    if uvloop is None or sys.version_info < (3, 11):
        asyncio.run(coro)
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(coro)


def _utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
