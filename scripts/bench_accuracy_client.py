"""Throughput of the ``accuracy run`` client against an instant local server.

Not a test: it measures how many questions per second the client itself can push, so that
on a real server the model, not the client, is the bottleneck. The server runs in its own
process (it would otherwise share the client's event loop and GIL) and answers every
request at once; the dataset is generated with prompt sizes like real 5-shot MMLU.

    python scripts/bench_accuracy_client.py [--questions 6000] [--parallel 512]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
BASELINE_QPS = 514.0  # SGLang's own MMLU bench script (benchmark/mmlu), measured the same way
GOAL_RATIO = 4.0
_FILLER = (
    "Consider the following situation described in some detail, with enough words to make "
    "the prompt about as long as a typical MMLU question and its options. "
)


def _write_dataset(root: Path, questions: int, subjects: int) -> None:
    """``subjects`` subjects sharing ``questions`` test rows, five dev rows each."""
    (root / "dev").mkdir(parents=True)
    (root / "test").mkdir(parents=True)
    per_subject = -(-questions // subjects)
    for s in range(subjects):
        name = f"bench_subject_{s}"
        rows = [[f"Dev {i}. {_FILLER}", "one", "two", "three", "four", "A"] for i in range(5)]
        with (root / "dev" / f"{name}_dev.csv").open("w", newline="") as handle:
            csv.writer(handle).writerows(rows)
        count = min(per_subject, questions - s * per_subject)
        rows = [
            [f"Q{i}. {_FILLER}", f"a{i}", f"b{i}", f"c{i}", f"d{i}", "ABCD"[i % 4]]
            for i in range(count)
        ]
        with (root / "test" / f"{name}_test.csv").open("w", newline="") as handle:
            csv.writer(handle).writerows(rows)


_RESPONSE_BODY = b'{"text": " A"}'
_RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\nConnection: keep-alive\r\n\r\n%s"
    % (len(_RESPONSE_BODY), _RESPONSE_BODY)
)


class _InstantHttp(asyncio.Protocol):
    """Keep-alive HTTP/1.1 responder that answers every complete request with " A".

    Deliberately minimal (Content-Length bodies only, which is what the client sends) so the
    server's CPU cost stays far below the client's and the benchmark measures the client.
    """

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.buffer = bytearray()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            length = 0
            for line in bytes(self.buffer[:end]).split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            total = end + 4 + length
            if len(self.buffer) < total:
                return
            del self.buffer[:total]
            self.transport.write(_RESPONSE)


def _serve() -> None:
    """Child process: the instant server on a free port; prints the port."""
    try:
        import uvloop
    except ImportError:
        uvloop = None
    loop = uvloop.new_event_loop() if uvloop else asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    server = loop.run_until_complete(loop.create_server(_InstantHttp, "127.0.0.1", 0, backlog=4096))
    print(server.sockets[0].getsockname()[1], flush=True)
    loop.run_forever()


def _bench(questions: int, parallel: int, subjects: int) -> float:
    sys.path.insert(0, str(REPO_ROOT / "python"))
    from sglang_nvfp4_patches.accuracy.report import format_run_report, run_notes
    from sglang_nvfp4_patches.accuracy.run import RunConfig, run_accuracy

    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True
    )
    try:
        port = int(server.stdout.readline())
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "mmlu"
            _write_dataset(data, questions, subjects)
            config = RunConfig(
                base_url=f"http://127.0.0.1:{port}",
                data_dir=data,
                out=Path(tmp) / "run.json",
                parallel=parallel,
                progress=False,
            )
            start, cpu_start = time.perf_counter(), time.process_time()
            outcome = run_accuracy(config, config.load_items(), print)
            total, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    finally:
        server.terminate()
        server.wait(timeout=10)
    run = outcome.run
    if run is None or outcome.exit_code != 0:
        print(format_run_report(outcome))
        print("\n".join(run_notes(outcome)), file=sys.stderr)
        raise SystemExit("benchmark run did not complete")
    qps = float(run["questions_per_s"])
    print(
        f"{run['n_answered']} questions, --parallel {parallel}: {qps:.0f} questions/s "
        f"(request phase {run['wall_time_s']:.2f} s; whole command incl. data load and "
        f"RUN.json {total:.2f} s, {run['n_answered'] / total:.0f} q/s)"
    )
    # CPU time is what the client costs regardless of what else the host is running.
    cpu_us = 1e6 * cpu / run["n_answered"]
    print(
        f"client CPU {cpu_us:.0f} us/question (whole command): one free core sustains about "
        f"{1e6 / cpu_us:.0f} q/s"
    )
    ratio = qps / BASELINE_QPS
    verdict = "meets" if ratio >= GOAL_RATIO else "MISSES"
    print(
        f"{ratio:.2f}x SGLang's MMLU bench script's {BASELINE_QPS:.0f} q/s "
        f"({verdict} the {GOAL_RATIO:.0f}x goal)"
    )
    return qps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=6000)
    parser.add_argument("--parallel", type=int, default=512)
    parser.add_argument("--subjects", type=int, default=20)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve()
        return
    _bench(args.questions, args.parallel, args.subjects)


if __name__ == "__main__":
    main()
