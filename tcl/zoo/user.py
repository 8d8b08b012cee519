"""The user's own networks (``tcl zoo add``): a PyTorch model given as MODULE:FACTORY, at the
input shapes it runs with, extracted like the built-in zoo and named in params.yaml like it.

MODULE is an importable module (the working directory is searched first) or a ``.py`` file;
FACTORY is a callable in it that returns an ``nn.Module``. Each ``tcl zoo add`` adds one
variant (one set of input shapes); adding the same name with other shapes adds another.
A network is registered only once its tasks are in the zoo: a factory that does not exist,
inputs that do not fit, or an operator the exporter cannot convert leave the zoo as it was.
Importing MODULE and calling FACTORY may take ``zoo.factory_timeout_s`` seconds (params.yaml;
``tcl zoo add --timeout``); one that takes longer is an error naming it, and adds nothing.
"""
from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..config import Paths, TclError, check_name
from ..store.jsonfile import JsonRegistry
from ..store.locks import locked
from . import DEFAULT_FACTORY_TIMEOUT_S
from .extract import build_zoo
from .networks import NETWORKS, NetworkInstance

DTYPES = ("float32", "float16", "int64", "int32")
# Narrower than the name rule (tcl.config.check_name): an instance key joins the name to its
# input shapes with '-', and a name with '-' could be another network's key.
_NETWORK_NAME = re.compile(r"[a-z][a-z0-9_]*")
_SHAPE = re.compile(r"^[1-9][0-9]*(x[1-9][0-9]*)*$")


def parse_inputs(specs: list[str]) -> str:
    """The canonical form of ``--input`` specs: ``SHAPE[:DTYPE]`` joined by commas, where SHAPE
    is e.g. ``1x3x224x224`` and DTYPE one of DTYPES (default float32, left out)."""
    if not specs:
        raise TclError("a network needs at least one --input SHAPE (e.g. 1x3x224x224)")
    out = []
    for spec in specs:
        shape, _, dtype = spec.strip().partition(":")
        if not _SHAPE.match(shape) or (dtype and dtype not in DTYPES):
            raise TclError(f"invalid --input {spec!r}: expected a shape of positive sizes like "
                           f"1x3x224x224, optionally with a dtype like 1x128:int64 (one of "
                           f"{', '.join(DTYPES)})")
        out.append(shape if dtype in ("", "float32") else f"{shape}:{dtype}")
    return ",".join(out)


def example_inputs(inputs: str) -> tuple:
    """Tensors of the canonical ``inputs``: normal floats; integers in {0, 1} (valid indices of
    any embedding table)."""
    import torch

    tensors = []
    for spec in inputs.split(","):
        shape, _, dtype = spec.partition(":")
        size = tuple(int(d) for d in shape.split("x"))
        dt = getattr(torch, dtype or "float32")
        tensors.append(torch.randint(0, 2, size, dtype=dt) if not dt.is_floating_point
                       else torch.randn(size, dtype=dt))
    return tuple(tensors)


def load_factory(ref: str) -> Callable:
    """The callable named by ``MODULE:FACTORY`` (MODULE: a module name or a .py file)."""
    module_name, sep, attr = ref.rpartition(":")
    if not sep or not module_name or not attr.isidentifier():
        raise TclError(f"invalid --model {ref!r}: expected MODULE:FACTORY, e.g. mypkg.nets:build "
                       "or path/to/net.py:build")
    if module_name.endswith(".py") or "/" in module_name:
        path = Path(module_name)
        if not path.is_file():
            raise TclError(f"--model {ref!r}: no file {path}")
        if path.suffix != ".py":   # Python finds no loader for it (spec None)
            raise TclError(f"--model {ref!r}: {path} is not a .py file; MODULE is a module name "
                           "or a path to a .py file")
        spec = importlib.util.spec_from_file_location(f"tcl_user_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        _exec(lambda: spec.loader.exec_module(module), ref)
    else:
        cwd = str(Path.cwd())
        added = cwd not in sys.path
        if added:
            sys.path.insert(0, cwd)
        try:
            module = _exec(lambda: importlib.import_module(module_name), ref)
        finally:
            if added:
                sys.path.remove(cwd)
    factory = getattr(module, attr, None)
    if factory is None:
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                       and getattr(v, "__module__", None) == module.__name__)
        raise TclError(f"--model {ref!r}: {module_name} has no {attr!r}; it defines: "
                       f"{', '.join(found) or 'no callables'}")
    if not callable(factory):
        raise TclError(f"--model {ref!r}: {attr} is a {type(factory).__name__}, not a callable")
    return factory


def _exec(fn: Callable, ref: str):
    try:
        return fn()
    except ModuleNotFoundError as e:
        raise TclError(f"--model {ref!r}: cannot import {e.name!r} ({e})") from None
    except Exception as e:  # the user's module failed while importing
        raise TclError(f"--model {ref!r}: importing it raised {type(e).__name__}: {e}") from None


@dataclass(frozen=True)
class UserNetwork:
    name: str
    model_ref: str                 # MODULE:FACTORY (a file as an absolute path)
    variants: tuple[str, ...]      # canonical inputs (parse_inputs), one per added variant
    holdout: bool = False          # evaluate on it, never train on its tasks
    timeout_s: float = DEFAULT_FACTORY_TIMEOUT_S  # importing MODULE and calling FACTORY

    def model(self):
        """The factory's network in inference mode (imported and built within ``timeout_s``)."""
        from torch import nn

        def build():
            factory = load_factory(self.model_ref)
            try:
                return factory()
            except Exception as e:
                raise TclError(f"network {self.name!r}: {self.model_ref} raised "
                               f"{type(e).__name__}: {e}") from None

        model = _within(build, self.timeout_s,
                        f"network {self.name!r}: {self.model_ref} did not return its module "
                        f"within {self.timeout_s:g} s (zoo.factory_timeout_s in params.yaml; "
                        "tcl zoo add --timeout)")
        if not isinstance(model, nn.Module):
            raise TclError(f"network {self.name!r}: {self.model_ref} returned an object of "
                           f"type {type(model).__name__}; expected a torch.nn.Module")
        return model.eval()

    def example(self, inputs: str) -> tuple:
        return example_inputs(inputs)

    def instance(self, inputs: str) -> NetworkInstance:
        batch = int(inputs.split(",")[0].split("x")[0])
        key = f"{self.name}-" + inputs.replace(",", "_").replace(":", "-")
        return NetworkInstance(self.name, batch, 0, inputs, key, self.holdout, source=self)

    def instances(self) -> list[NetworkInstance]:
        return [self.instance(v) for v in self.variants]

    def to_json(self) -> dict:
        return {"model": self.model_ref, "inputs": list(self.variants), "holdout": self.holdout}


def _within(fn: Callable, timeout_s: float, late: str):
    """``fn()`` in a daemon thread, waited for at most ``timeout_s``: a user's factory that
    never returns (a deadlock, a download that hangs) is a TclError ``late``, not a hang. The
    thread cannot be stopped; being a daemon, it ends with the command."""
    done: dict = {}

    def run() -> None:
        try:
            done["value"] = fn()
        except BaseException as e:  # re-raised in the caller's thread
            done["error"] = e

    thread = threading.Thread(target=run, name="tcl-user-factory", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise TclError(late)
    if "error" in done:
        raise done["error"]
    return done["value"]


class UserNetworks:
    """The registry of the user's networks, ``user_networks.json`` under the data root."""

    def __init__(self, paths: Paths, factory_timeout_s: float = DEFAULT_FACTORY_TIMEOUT_S):
        self.paths = paths
        self.factory_timeout_s = factory_timeout_s

    def _file(self) -> JsonRegistry:
        return JsonRegistry(self.paths.user_networks_file, "the user network registry")

    def all(self) -> dict[str, UserNetwork]:
        return self._file().read(lambda raw: {
            check_network_name(n): UserNetwork(n, d["model"], tuple(d["inputs"]),
                                               bool(d.get("holdout", False)),
                                               self.factory_timeout_s)
            for n, d in raw.items()})

    def add(self, name: str, model_ref: str, inputs: list[str],
            holdout: bool = False) -> tuple[NetworkInstance, bool]:
        """Add ``name`` at ``inputs`` (extracting its tasks into the zoo); returns the instance
        and whether it was new. The same variant again is a no-op."""
        check_network_name(name)
        if name in NETWORKS:
            raise TclError(f"{name!r} is a built-in network of the zoo; choose another name")
        canonical = parse_inputs(inputs)
        module_name, _, attr = model_ref.rpartition(":")
        if module_name.endswith(".py") or "/" in module_name:  # files by absolute path
            model_ref = f"{Path(module_name).resolve()}:{attr}"
        with locked(self.paths, "user-networks", what="the user network registry"):
            users = self.all()
            old = users.get(name)
            if old is not None and (old.model_ref, old.holdout) != (model_ref, holdout):
                raise TclError(f"network {name!r} was added as {old.model_ref} (holdout "
                               f"{old.holdout}); refusing to redefine it as {model_ref} (holdout "
                               f"{holdout}): choose another name")
            if old is not None and canonical in old.variants:
                return old.instance(canonical), False
            variants = (old.variants if old else ()) + (canonical,)
            net = UserNetwork(name, model_ref, variants, holdout, self.factory_timeout_s)
            inst = net.instance(canonical)
            check_fits(inst)
            build_zoo(self.paths, instances=[inst])   # writes nothing when extraction fails
            users[name] = net
            self._file().write({n: u.to_json() for n, u in users.items()})
        return inst, True


def check_network_name(name: str) -> str:
    """``name`` if it can name a user network: the name rule, then lower case and '_' only."""
    check_name(name, "network name")
    if not _NETWORK_NAME.fullmatch(name):
        raise TclError(f"invalid network name {name!r}: use lower-case letters, digits and '_', "
                       "starting with a letter")
    return name


def check_fits(inst: NetworkInstance) -> None:
    """Run the network once on example inputs: a shape that does not fit fails here, with
    PyTorch's own message, before anything is exported."""
    import torch

    model = inst.module()
    try:
        with torch.no_grad():
            model(*inst.example())
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise TclError(f"inputs {inst.input_shape} do not fit network {inst.network!r}: "
                       f"{type(e).__name__}: {first}") from None


def user_networks(paths: Paths, factory_timeout_s: float = DEFAULT_FACTORY_TIMEOUT_S
                  ) -> dict[str, UserNetwork]:
    """name -> UserNetwork of the data root (empty when none were added)."""
    return UserNetworks(paths, factory_timeout_s).all()
