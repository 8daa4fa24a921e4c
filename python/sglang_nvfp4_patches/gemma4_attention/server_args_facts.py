"""The rule's facts read off a ServerArgs record, by each layout's hook: the checkpoint's
architecture, quantization and MoE block, SGLang's SM10X probe, the attention backends and,
only where it matters, the KV-cache dtype."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import logging
from typing import Any

from sglang_nvfp4_patches.gemma4_attention import NAME
from sglang_nvfp4_patches.gemma4_attention.rule import (
    SM10X_MAJOR,
    Gemma4Facts,
    is_nvfp4_moe_on_sm10x,
    kv_cache_is_fp8,
)

logger = logging.getLogger("sglang_nvfp4_patches.gemma4_attention")


def text_config(hf_config: Any) -> Any:
    inner = getattr(hf_config, "text_config", None)
    return hf_config if inner is None else inner


def architecture(hf_config: Any) -> str | None:
    architectures = getattr(hf_config, "architectures", None) or [None]
    return architectures[0]


def major(is_sm100: bool) -> int | None:
    """SM10X exactly as SGLang sees it when it picks trtllm_mha (its ``is_sm100`` probe)."""
    return SM10X_MAJOR if is_sm100 else None


def checkpoint_kv_cache_quant_algo(model_config: Any) -> object:
    """The checkpoint's KV-cache quantization exactly as SGLang's model loader reads it
    (``get_quant_config``: ``quantization_config`` in config.json, else the checkpoint's
    ``hf_quant_config.json``), which is what ``--kv-cache-dtype auto`` follows."""
    if not model_config.quantization:
        return None
    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.model_loader.weight_utils import get_quant_config

    # get_quant_config writes into the HF config's quantization dict (packed_modules_mapping,
    # hf_config), and SGLang shares that config object: it reads a private copy here.
    isolated = copy.copy(model_config)
    isolated.hf_config = copy.deepcopy(model_config.hf_config)
    parsed = get_quant_config(isolated, LoadConfig(), {})
    return getattr(parsed, "kv_cache_quant_algo", None)


def with_kv_cache(facts: Gemma4Facts, kv_cache_dtype: str | None, model_config: Any) -> Gemma4Facts:
    """Add the KV-cache fact, read only for the one combination where it matters."""
    if not is_nvfp4_moe_on_sm10x(facts):
        return facts
    try:
        fp8: bool | None = kv_cache_is_fp8(
            kv_cache_dtype, checkpoint_kv_cache_quant_algo(model_config)
        )
    except Exception as error:  # unreadable: counted as FP8, the checkpoint's default
        logger.debug("[%s] KV-cache dtype unknown (%s); assuming FP8", NAME, error)
        fp8 = None
    return dataclasses.replace(facts, kv_cache_fp8=fp8)


def read_facts(
    model_config: Any, is_sm100: bool, backends: Any, kv_cache_dtype: str | None
) -> Gemma4Facts:
    """Facts of one configuration; ``backends`` holds the three attention-backend fields (a
    ServerArgs record or a resolving view of one)."""
    hf_config = model_config.hf_config
    facts = Gemma4Facts(
        architecture=architecture(hf_config),
        quantization=model_config.quantization,
        enable_moe_block=getattr(text_config(hf_config), "enable_moe_block", None),
        compute_capability_major=major(is_sm100),
        attention_backend=backends.attention_backend,
        prefill_attention_backend=backends.prefill_attention_backend,
        decode_attention_backend=backends.decode_attention_backend,
    )
    return with_kv_cache(facts, kv_cache_dtype, model_config)


def pristine_record_facts(server_args: Any, given: Any) -> Gemma4Facts:
    """With ``resolve_once``: facts of a record that keeps the operator's input (resolution lives in
    declarations); the attention backends are read off ``given``, a view or the record."""
    from sglang.srt.arg_groups.model_override_base import model_config_of, resolving_view
    from sglang.srt.runtime_context import get_platform

    kv_cache_dtype = resolving_view(server_args).kv_cache_dtype
    return read_facts(model_config_of(server_args), get_platform().is_sm100, given, kv_cache_dtype)


def record_facts(server_args: Any, probe_module: str) -> Gemma4Facts:
    """Facts read straight off a ServerArgs record (resolved in place), with SGLang's SM10X probe
    as bound in ``probe_module``, the binding that release's Gemma 4 default reads."""
    is_sm100 = importlib.import_module(probe_module).is_sm100_supported()
    return read_facts(
        server_args.get_model_config(), is_sm100, server_args, server_args.kv_cache_dtype
    )
