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
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shlex
import subprocess
import sys
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

BANNER = "DEMO: scripted stand-in server, not SGLang, no GPU; these numbers measure nothing"
SUBJECTS = {"demo_algebra": 40, "demo_anatomy": 40, "demo_physics": 40}
LETTERS = "ABCD"
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


def serve(argv: list[str]) -> None:
    """The stand-in: SGLang's launcher flags in, ``/health`` and ``/generate`` out."""
    parser = argparse.ArgumentParser(prog="demo stand-in server")
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--attention-backend", default="auto")
    args, ignored = parser.parse_known_args(argv)
    key = json.loads(Path(args.model_path).read_text())
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
        Server((args.host, args.port), Handler).serve_forever()
    except KeyboardInterrupt:  # ab stops its servers with SIGINT, as SGLang expects
        print("DEMO stand-in server stopped", flush=True)


def main() -> int:
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=Path("demo-accuracy-ab"))
    args = parser.parse_args()
    data, model = write_demo_data(args.out_dir)
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
    code = subprocess.call(command)
    print(BANNER, file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
