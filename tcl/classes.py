"""Names to classes, one helper for every such registry: model kinds (``tcl.models``),
samplers (``tcl.samplers``) and distillation methods (``tcl.continual``).

A class is named by its module and class name and imported on first lookup, so listing the
names (params validation, the CLI's choices) imports neither torch nor xgboost, and a class
whose module is missing fails only when it is asked for.
"""
from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

from .config import TclError


class ClassRegistry(Mapping[str, type]):
    """name -> class, from ``locations`` (name -> (module, class name)). As a mapping an unknown
    name is a KeyError; ``get_class`` and ``make`` say it as a TclError naming ``what``."""

    def __init__(self, what: str, locations: dict[str, tuple[str, str]]) -> None:
        self.what = what
        self._locations = dict(locations)
        self._classes: dict[str, type] = {}

    def __getitem__(self, name: str) -> type:
        if name not in self._classes:
            module, cls = self._locations[name]  # KeyError for unknown names, as a dict
            try:
                self._classes[name] = getattr(importlib.import_module(module), cls)
            except (ImportError, AttributeError) as e:
                raise TclError(f"{self.what} {name!r} needs {module}.{cls}, which cannot be "
                               f"imported: {e}") from e
        return self._classes[name]

    def __contains__(self, name: object) -> bool:  # without importing the module
        return name in self._locations

    def __iter__(self) -> Iterator[str]:
        return iter(self._locations)

    def __len__(self) -> int:
        return len(self._locations)

    def add(self, name: str, module: str, cls: str) -> None:
        """Name one more class: a package above the registry's own adds the classes it defines
        (``tcl.continual`` adds the "continual" model kind), so the registry names none of them."""
        self._locations[name] = (module, cls)

    def get_class(self, name: str) -> type:
        if name not in self:
            raise TclError(f"unknown {self.what} {name!r}; known: {', '.join(self)}")
        return self[name]

    def make(self, name: str, **kwargs: Any) -> Any:
        """A new instance of ``name``'s class built with ``kwargs``."""
        cls = self.get_class(name)
        try:
            return cls(**kwargs)
        except TypeError as e:  # an unknown or missing keyword: say which class rejected it
            raise TclError(f"{self.what} {name!r} rejected parameters {sorted(kwargs)}: "
                           f"{e}") from e
