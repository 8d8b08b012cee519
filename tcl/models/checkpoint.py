"""Torch model files that hold data only: the one reader and writer of the neural and continual
models' checkpoints, and the one-off conversion of a file the safe reader refuses.

A model file is data: it may come from another machine, a shared data root or a download. It is
read with ``torch.load(weights_only=True)``, torch's restricted unpickler, which builds tensors
and plain values (str, int, float, bool, None, list, tuple, dict) and refuses every other
Python object, so a crafted file cannot run code here. ``write_checkpoint`` saves only such
values, so everything tcl writes reads back that way. An older tcl's file (numpy values where
tensors and floats belong) is refused, naming ``tcl models convert``, which reads it as data
with those numpy values allowed and rewrites it (``tcl.models.convert_file``, beside the
registry of kinds it needs). A file holding any other Python object is refused without that
hint: tcl never wrote one, and nothing in tcl runs the full unpickler, which would run it.
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
    """A model file holding Python objects besides tensors, plain values and an older tcl's
    numpy values: only the full unpickler reads it, which would run its code."""


class OlderModelFile(TclError):
    """A model file of an older tcl (numpy values): read as data with them allowed
    (``read_checkpoint(older=True)``), ``tcl models convert`` rewrites it."""


# What an older tcl's registry files may hold besides tensors: numpy arrays and scalars. Their
# reconstruction builds data only, so a registry file is read with these allowed (and checked
# against its recorded hash), never with the full unpickler. numpy 1 pickled the functions
# under numpy.core, numpy 2 under numpy._core.
_NUMPY = [np.ndarray, np.dtype, *{type(np.dtype(t)) for t in "?bhilqBHILQefdg"}] + [
    (getattr(np_multiarray, name), f"{module}.multiarray.{name}")
    for name in ("_reconstruct", "scalar") for module in ("numpy.core", "numpy._core")]


def read_checkpoint(path: str | Path, registered: bool = False, older: bool = False) -> Any:
    """A torch model file's contents (tensors and plain values only), or a TclError that names
    the file: also a damaged archive (a part failing its CRC) and contents that do not hash to
    the ``content_hash`` recorded at save. The full unpickler is never used here.
    ``older``: numpy values of an older tcl are read too (as tensors and plain values), what
    ``tcl models convert`` reads. ``registered``: a registry file, which tcl wrote: read so
    too, and one holding other objects was replaced, which its refusal says."""
    path = Path(path)
    try:
        if zipfile.is_zipfile(path):   # torch's format: stored parts whose CRC torch ignores
            with zipfile.ZipFile(path) as z:
                bad = z.testzip()
            if bad is not None:
                raise TclError(f"model file {path} is damaged: its part {bad} fails its CRC "
                               "check; restore it from a backup or train it again")
        doc = _load(path, older or registered)
    except TclError:
        raise
    except FileNotFoundError:
        raise TclError(f"model file {path} does not exist") from None
    except IsADirectoryError:
        raise TclError(f"model file {path} is a directory; expected a model file") from None
    except pickle.UnpicklingError as e:
        if _REFUSED in str(e) and _OBJECT.search(str(e)):
            raise _refusal(path, registered, older or registered) from None
        why = _WHY.search(str(e))
        raise TclError(f"model file {path} is not a readable tcl model file: "
                       f"{why.group(1) if why else str(e).splitlines()[0]}") from None
    except Exception as e:  # noqa: BLE001 - any unreadable file is a user error here
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise TclError(f"model file {path} is not a readable tcl model file: {first}") from None
    if isinstance(doc, dict):
        check_content(doc, path)
    return doc


def _load(path: Path, older: bool) -> Any:
    """torch's restricted unpickler on ``path``; ``older``: an older tcl's numpy values allowed
    too, returned as tensors and plain values."""
    if not older:
        return torch.load(path, map_location="cpu", weights_only=True)
    with torch.serialization.safe_globals(_NUMPY):
        return plain(torch.load(path, map_location="cpu", weights_only=True))


def _refusal(path: Path, registered: bool, older: bool) -> TclError:
    """Why ``path``, where the safe reader stopped at a Python object, is refused. Only an
    older tcl's file (numpy values, read as data) is offered to ``tcl models convert``: any
    other object is what a crafted file holds, and no command of tcl would read it."""
    if not older and _reads_as_older(path):
        return OlderModelFile(f"model file {path} holds numpy values, as an older tcl wrote "
                              f"them; convert it once with `tcl models convert {path}`, which "
                              "reads it as data only")
    why = ("tcl writes registry files as data only, so it was replaced or changed after "
           "registration") if registered else "tcl never writes such a file"
    return UnsafeModelFile(f"model file {path} holds Python objects besides tensors and plain "
                           f"values, which could run code when loaded, so it is refused; {why}: "
                           "restore it from a backup or train it again")


def _reads_as_older(path: Path) -> bool:
    """Whether ``path`` reads as data once an older tcl's numpy values are allowed."""
    try:
        _load(path, older=True)
    except Exception:  # noqa: BLE001 - any failure: not an older tcl's file
        return False
    return True


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
