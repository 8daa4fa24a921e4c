"""Start SGLang the way a user does, on a simulated SM100, and stop right before the GPU.

``entrypoint_probe.py ENTRY MODEL_DIR`` with ENTRY one of
  launch_server    python -m sglang.launch_server --model-path DIR
  serve            sglang serve --model-path DIR
  engine           sglang.Engine(model_path=DIR)
  engine_prebuilt  sglang.Engine(server_args=ServerArgs(model_path=DIR)), the record built
                   before SGLang loads plugins
Each entry point calls ``load_plugins()`` itself; nothing here loads the plugin. The probe
observes the ServerArgs the entry point built (``prepare_server_args`` for the launchers,
``Engine._launch_subprocesses`` for the engine), resolves it if the release resolves later,
hands a pickled copy to the check the scheduler process runs on the records it receives
(``server_args_seam.hooks.check_record``, as SGLang's pickling to the scheduler would), prints
``STATE {json}`` and exits before anything needs a GPU.
"""

from __future__ import annotations

import json
import logging
import pickle
import runpy
import sys
from typing import Any, NoReturn

from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES, simulated_gpu
from sglang_nvfp4_patches.supported_releases import sglang_version


def report_and_exit(server_args: Any) -> NoReturn:
    if hasattr(server_args, "resolve_once"):  # 0.5.20+ resolve after the entry point
        server_args.resolve_once()
        attention = server_args.resolved_dict()["attention_backend"]
    else:
        attention = server_args.attention_backend
    from sglang_nvfp4_patches.server_args_seam.hooks import check_record

    check_record(pickle.loads(pickle.dumps(server_args)))
    print("STATE " + json.dumps({"sglang": sglang_version(), "attention_backend": attention}))
    sys.stdout.flush()
    raise SystemExit(0)


def observe_prepare_server_args() -> None:
    import sglang.srt.server_args as server_args_module

    real = server_args_module.prepare_server_args

    def prepare_then_stop(argv: list[str]) -> NoReturn:
        report_and_exit(real(argv))

    server_args_module.prepare_server_args = prepare_then_stop


def observe_engine_launch() -> None:
    from sglang.srt.entrypoints.engine import Engine

    def launch_then_stop(cls: type, server_args: Any, *args: Any, **kwargs: Any) -> NoReturn:
        report_and_exit(server_args)

    Engine._launch_subprocesses = classmethod(launch_then_stop)


def main() -> None:
    entry, model_dir = sys.argv[1], sys.argv[2]
    logging.basicConfig(level=logging.WARNING)
    flags = ["--model-path", model_dir, "--device", "cuda"]
    with simulated_gpu(GPU_PROFILES["sm100"]):
        if entry == "launch_server":
            observe_prepare_server_args()
            sys.argv = ["sglang.launch_server", *flags]
            runpy.run_module("sglang.launch_server", run_name="__main__")
        elif entry == "serve":
            observe_prepare_server_args()
            sys.argv = ["sglang", "serve", *flags]
            from sglang.cli.main import main as sglang_cli

            sglang_cli()
        elif entry in ("engine", "engine_prebuilt"):
            observe_engine_launch()
            import sglang

            if entry == "engine":
                sglang.Engine(model_path=model_dir, device="cuda")
            else:
                from sglang.srt.server_args import ServerArgs

                sglang.Engine(server_args=ServerArgs(model_path=model_dir, device="cuda"))
        else:
            raise SystemExit(f"unknown entry point {entry!r}")
    raise SystemExit("the entry point returned without building ServerArgs")


if __name__ == "__main__":
    main()
