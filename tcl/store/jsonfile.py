"""The small JSON registries under the data root (the device registry, the user networks, the
devices whose add-device run failed): one object of name -> entry, read whole and written whole.

A write goes to a temporary file beside the registry, then replaces it: a reader (another
process, or this one after a crash) sees the old file or the new one, never a torn one. The
caller holds the registry's lock (``tcl.store.locks``) around read-modify-write.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, TypeVar

from ..config import TclError, atomic_write, read_text

T = TypeVar("T")

# What a malformed entry raises while an entry is parsed (a missing key, a wrong type).
BAD_ENTRY = (ValueError, TypeError, KeyError, AttributeError)


class JsonRegistry:
    """``path``, a JSON object; ``what`` names it in errors (e.g. "device registry")."""

    def __init__(self, path: Path, what: str) -> None:
        self.path, self.what = Path(path), what

    def read(self, parse: Callable[[dict[str, Any]], T] | None = None) -> T | dict[str, Any]:
        """The registry's object ({} when there is no file yet), through ``parse`` if given;
        a file that is not a JSON object, or an entry ``parse`` refuses, is a TclError naming
        the file (nothing is changed: the user fixes or removes it)."""
        if not self.path.exists():
            raw: Any = {}
        else:
            try:
                raw = json.loads(read_text(self.path, self.what))
            except ValueError as e:
                raise self.invalid(e) from None
        if not isinstance(raw, dict):
            raise self.invalid(TypeError(f"expected a JSON object, got {type(raw).__name__}"))
        if parse is None:
            return raw
        try:
            return parse(raw)
        except TclError as e:   # an entry a rule refuses (e.g. an older tcl's non-ASCII name)
            raise TclError(f"{self.what} {self.path} holds an entry tcl refuses ({e}); rename "
                           "or remove that entry") from None
        except BAD_ENTRY as e:
            raise self.invalid(e) from None

    def invalid(self, error: Exception) -> TclError:
        return TclError(f"{self.what} {self.path} is not valid ({type(error).__name__}: "
                        f"{error}); fix or remove it")

    def write(self, data: dict[str, Any]) -> None:
        """Replace the registry with ``data``, atomically."""
        with atomic_write(self.path, self.what) as tmp:
            tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
