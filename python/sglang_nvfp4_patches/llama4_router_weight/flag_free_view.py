"""A runner config that reads ``apply_router_weight_on_input`` as ``False`` (pure: no SGLang,
no torch), sharing the config's attribute dict, for the method's own check while its
``MoeRunner`` keeps the real config. A new config made of the view (``copy``, ``pickle``,
``dataclasses.replace``...) gets the real flag back: one that silently lost the flag would
apply the router weight zero times.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

FLAG = "apply_router_weight_on_input"


def _real_config(config_cls: type, state: dict[str, Any]) -> Any:
    """A plain ``config_cls`` instance holding ``state`` (the real flag included)."""
    config = object.__new__(config_cls)
    config.__dict__.update(state)
    return config


class _Rebuild:
    """Stands where ``dataclasses.replace`` reads ``view.__class__``: it builds the real
    config class, restoring the flag the view hid when the caller did not change it."""

    def __init__(self, config_cls: type, shared: dict[str, Any]) -> None:
        self._config_cls = config_cls
        self._shared = shared
        self.__name__ = config_cls.__name__
        self.__qualname__ = config_cls.__qualname__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._shared.get(FLAG) and kwargs.get(FLAG) is False:
            kwargs[FLAG] = True
        return self._config_cls(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # __dataclass_fields__, __module__, ...
        return getattr(self._config_cls, name)


@functools.cache
def _flag_free_class(config_cls: type) -> type:
    """``config_cls`` with the flag pinned to ``False`` (a property wins over the shared
    instance dict; writes to it are ignored)."""

    def reduce_ex(view: Any, _protocol: int) -> tuple[Any, ...]:
        return _real_config, (config_cls, dict(view.__dict__))

    return type(
        f"FlagFree{config_cls.__name__}",
        (config_cls,),
        {
            "__doc__": "A runner config seen without apply_router_weight_on_input.",
            "__module__": __name__,
            FLAG: property(lambda _: False, lambda _, __: None),
            "__class__": property(lambda view: _Rebuild(config_cls, view.__dict__)),
            "__reduce_ex__": reduce_ex,
            "__copy__": lambda view: _real_config(config_cls, dict(view.__dict__)),
            "__deepcopy__": lambda view, memo: _real_config(
                config_cls, copy.deepcopy(dict(view.__dict__), memo)
            ),
        },
    )


def without_router_weight_on_input(runner_config: Any) -> Any:
    """A view of ``runner_config`` that reads the flag as ``False`` (see the module doc)."""
    view = object.__new__(_flag_free_class(type(runner_config)))
    view.__dict__ = runner_config.__dict__
    return view
