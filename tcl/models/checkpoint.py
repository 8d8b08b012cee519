"""Torch model files that hold data only: the one reader and writer of the neural and continual
models' checkpoints, and the one-off conversion of a file the safe reader refuses.

A model file is data: it may come from another machine, a shared data root or a download. It is
read with ``torch.load(weights_only=True)``, torch's restricted unpickler, which builds tensors
and plain values (str, int, float, bool, None, list, tuple, dict) and refuses every other
Python object, so a crafted file cannot run code here. ``write_checkpoint`` saves only such
values, so everything tcl writes reads back that way. A file that needs the full unpickler (one
holding other Python objects) is refused, naming ``tcl models convert``: the only place that
runs the full unpickler, on files the user names and so vouches for
(``tcl.models.convert_file``, beside the registry of kinds it needs).
"""
from __future__ import annotations

import pickle
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy._core.multiarray as np_multiarray
import torch

from ..config import TclError, atomic_write
from .base import check_content, content_digest

# torch's message when its restricted unpickler stops; _OBJECT: it stopped at a Python object
# (a global, a class, a call), not at bytes that are no pickle at all
_REFUSED = "Weights only load failed"
_OBJECT = re.compile(r"GLOBAL|allowlisted|Trying to call reduce")
_WHY = re.compile(r"WeightsUnpickler error:\s*(\S[^\n]*)")


class UnsafeModelFile(TclError):
    """A model file that only the full unpickler reads (it holds Python objects)."""


def convert_hint(path: Path) -> str:
    return (f"if an older tcl wrote it and you trust the file, convert it once with "
            f"`tcl models convert {path}` (that runs the full unpickler on it)")


# What an older tcl's registry files may hold besides tensors: numpy arrays and scalars. Their
# reconstruction builds data only, so a registry file is read with these allowed (and checked
# against its recorded hash), never with the full unpickler. numpy 1 pickled the functions
# under numpy.core, numpy 2 under numpy._core.
_NUMPY = [np.ndarray, np.dtype, *{type(np.dtype(t)) for t in "?bhilqBHILQefdg"}] + [
    (getattr(np_multiarray, name), f"{module}.multiarray.{name}")
    for name in ("_reconstruct", "scalar") for module in ("numpy.core", "numpy._core")]


def read_checkpoint(path: str | Path, registered: bool = False) -> Any:
    """A torch model file's contents (tensors and plain values only), or a TclError that names
    the file: also a damaged archive (a part failing its CRC) and contents that do not hash to
    the ``content_hash`` recorded at save. The full unpickler is never used here.
    ``registered``: a registry file, which tcl wrote: numpy values of an older tcl are read too
    (as tensors and plain values), and one holding other objects was replaced, so the refusal
    does not offer ``tcl models convert`` (which would run it)."""
    path = Path(path)
    try:
        if zipfile.is_zipfile(path):   # torch's format: stored parts whose CRC torch ignores
            with zipfile.ZipFile(path) as z:
                bad = z.testzip()
            if bad is not None:
                raise TclError(f"model file {path} is damaged: its part {bad} fails its CRC "
                               "check; restore it from a backup or train it again")
        if registered:
            with torch.serialization.safe_globals(_NUMPY):
                doc = plain(torch.load(path, map_location="cpu", weights_only=True))
        else:
            doc = torch.load(path, map_location="cpu", weights_only=True)
    except TclError:
        raise
    except FileNotFoundError:
        raise TclError(f"model file {path} does not exist") from None
    except pickle.UnpicklingError as e:
        if _REFUSED in str(e) and _OBJECT.search(str(e)):
            what = ("tcl writes registry files as data only, so it was replaced or changed "
                    "after registration: restore it from a backup") if registered \
                else convert_hint(path)
            raise UnsafeModelFile(f"model file {path} holds Python objects besides tensors and "
                                  f"plain values, which could run code when loaded, so it is "
                                  f"refused; {what}") from None
        why = _WHY.search(str(e))
        raise TclError(f"model file {path} is not a readable tcl model file: "
                       f"{why.group(1) if why else str(e).splitlines()[0]}") from None
    except Exception as e:  # noqa: BLE001 - any unreadable file is a user error here
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise TclError(f"model file {path} is not a readable tcl model file: {first}") from None
    if isinstance(doc, dict):
        check_content(doc, path)
    return doc


def plain(value: Any, where: str = "checkpoint") -> Any:
    """``value`` as what ``torch.load(weights_only=True)`` rebuilds: tensors (numpy arrays
    become tensors), plain scalars (numpy scalars become Python's), str, None, and lists,
    tuples, sets and dicts of them; a Path becomes its str. Anything else is a TclError naming where
    it is, so a model can never write a file that needs the full unpickler."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, np.generic):       # first: np.float64 is also a float, but pickles
        return value.item()                 # as a numpy object the safe reader refuses
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.array(value))          # a copy: no view of the caller's
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = plain(k, where)
            if not isinstance(key, (str, int)):
                raise TclError(f"{where}: key {k!r} is not a str or int; a model file holds "
                               f"plain values only")
            out[key] = plain(v, f"{where}[{k!r}]")
        return out
    if isinstance(value, (list, tuple, set)):
        items = [plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return type(value)(items)
    raise TclError(f"{where} is a {type(value).__name__}; a model file holds tensors and plain "
                   f"values only (str, numbers, None, lists, dicts)")


def write_checkpoint(doc: dict[str, Any], path: str | Path) -> None:
    """Save ``doc`` (a dict with "kind") as plain values, atomically: a reader sees the whole
    file or the previous one."""
    path = Path(path)
    data = plain(doc, f"model file {path}")
    data["content_hash"] = content_digest(data)
    with atomic_write(path, "model file") as tmp:
        torch.save(data, tmp)
