"""The pipeline's knobs: ``params.yaml`` loaded and validated into dataclasses.

Every stage (``tcl stage ...``, the DVC stages, the Prefect flows) starts with ``load_params``,
which checks the whole file before any work: unknown keys, missing keys, wrong types, unknown
devices, networks and model kinds, NaN or infinite numbers, and hyperparameters a model rejects
all raise a ``TclError`` naming the key, e.g. ``params.yaml: train.models[1]: unknown model kind 'foo' (known: ...)``.
"""
from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from ..budget import check_budget
from ..config import MAX_SEED, Paths, TclError, read_text, resolved
from ..continual import BACKBONES, DISTILLERS
from ..zoo import DEFAULT_FACTORY_TIMEOUT_S, FACTORY_TIMEOUT_RANGE

DEFAULT_FILE = "params.yaml"
# A params file is a page of knobs: larger files, and YAML whose aliases expand to more nodes
# than this ("billion laughs"), are refused before they are built.
MAX_FILE_BYTES = 1 << 20
MAX_EXPANDED_NODES = 100_000


@dataclass(frozen=True)
class ZooParams:
    networks: tuple[str, ...]   # names in tcl.zoo.networks.NETWORKS
    small: bool                 # reduced input shapes (tests)
    factory_timeout_s: float = DEFAULT_FACTORY_TIMEOUT_S  # a user network's factory (zoo add)


@dataclass(frozen=True)
class SampleParams:
    programs_per_task: int      # candidates sampled, and measured on every device, per task
    max_train_tasks: int | None    # N training tasks, stratified by operator class (None: all)
    max_holdout_tasks: int | None  # N held-out tasks, stratified the same way (None: all)
    seed: int


@dataclass(frozen=True)
class MeasureParams:
    batch_size: int             # programs built, then run, per batch (batches span tasks)
    pipelined: bool             # build the next batch while this one runs, where a core is free
    retries: int                # Prefect retries of a device's measurement after a transient error
    retry_delay_s: float


@dataclass(frozen=True)
class TrainParams:
    models: tuple[str, ...]     # kinds in tcl.models.MODEL_KINDS
    valid_fraction: float       # share of the training tasks kept for early stopping
    seed: int                   # validation split and every model's seed
    hyper: dict[str, dict[str, Any]] = field(default_factory=dict)  # kind -> make_model kwargs
    seeds: int = 1              # models per kind and device: seeds seed, seed + 1, ...; the
                                # report gives each figure as mean and standard error over them
    sources: tuple[str, ...] | None = None   # records learned from (tcl.dataset.SOURCES); None: all

    @property
    def seed_list(self) -> list[int]:
        """The training seeds; the first one's model is the one served (``<kind>.model``)."""
        return [self.seed + i for i in range(self.seeds)]

    def hyper_of(self, kind: str) -> dict[str, Any]:
        """The kind's ``make_model`` keyword arguments (the seed is ``seed``, given apart)."""
        return dict(self.hyper.get(kind, {}))


@dataclass(frozen=True)
class ContinualParams:
    sequence: tuple[str, ...]   # continual.first, then continual.then's devices: the first
                                # trains on its full data, each later one is distilled from
                                # the model of the one before
    backbone: str               # tenset-mlp or mamba (its train.hyper entry is the recipe)
    method: str                 # one of tcl.continual.DISTILLERS
    subset: int | float         # a later device's measured subset: a count or a share of its pool
    subset_from: str            # "measured": select among its measured records; "selections":
                                # only what an active collection selected (tcl collect --select)
    kd_new: float               # distillation weights (tcl.continual.base.Settings)
    kd_old: float
    ewc: float
    seed: int


@dataclass(frozen=True)
class AddDeviceParams:
    eval_programs_per_task: int  # a new device's evaluation set: candidates per held-out task
    refresh_cron: str            # `tcl serve`: when the refresh deployment runs (cron, UTC)


@dataclass(frozen=True)
class ScaleOutParams:
    task_runner: str             # "local": this process; "dask": a Dask cluster (prefect-dask)
    dask_address: str | None     # with dask: None starts a LocalCluster, else the scheduler
    dask_workers: int            # LocalCluster workers (one thread each)


@dataclass(frozen=True)
class SelectParams:
    devices: tuple[str, ...]    # measured by selection (active collection), not in full
    sampler: str                # one of tcl.samplers.SAMPLERS
    budget: int | float         # a count, or a share of the device's pool (the candidates)
    rounds: int                 # later rounds: uncertainty from a model of the rounds so far
    weights: dict[str, float]   # RDU's r, d, u (0 turns a term off)
    per_task: bool              # split the budget over tasks by zoo weight first
    teacher: str                # "<device>/<kind>": round 0's model (cold start)
    seed: int


@dataclass(frozen=True)
class EvaluateParams:
    top_k: tuple[int, ...]


@dataclass(frozen=True)
class Params:
    source: Path                # the params file (data is resolved against its directory)
    data: str
    devices: tuple[str, ...]
    zoo: ZooParams
    sample: SampleParams
    measure: MeasureParams
    train: TrainParams
    select: SelectParams
    evaluate: EvaluateParams
    continual: ContinualParams
    add_device: AddDeviceParams
    scale_out: ScaleOutParams

    @property
    def paths(self) -> Paths:
        return data_paths(self.source, self.data)


def data_paths(source: Path, data: str) -> Paths:
    """The data root ``data``, relative to the params file's directory unless absolute."""
    root = Path(data)
    return Paths(resolved(root if root.is_absolute() else source.resolve().parent / root,
                          "data root"))


# ---------------------------------------------------------------------------------------------
# Validation helpers: each names the key path in its message.


class _Reader:
    def __init__(self, source: str):
        self.source = source

    def fail(self, key: str, problem: str) -> TclError:
        return TclError(f"{self.source}: {key}: {problem}" if key else f"{self.source}: {problem}")

    def section(self, raw: Any, key: str, expected: tuple[str, ...]) -> dict:
        if not isinstance(raw, dict):
            raise self.fail(key, f"expected a mapping with keys {', '.join(expected)}, "
                                 f"got {_show(raw)}")
        unknown = [k for k in raw if k not in expected]
        if unknown:
            where = f"{key}.{unknown[0]}" if key else str(unknown[0])
            raise self.fail(where, f"unknown key (expected one of: {', '.join(expected)})")
        missing = [k for k in expected if k not in raw]
        if missing:
            where = f"{key}.{missing[0]}" if key else missing[0]
            raise self.fail(where, "missing value (every knob must be set in the params file)")
        return raw

    def integer(self, raw: Any, key: str, minimum: int | None = None,
                allow_none: bool = False, maximum: int | None = None) -> int | None:
        if raw is None and allow_none:
            return None
        if isinstance(raw, bool) or not isinstance(raw, int):
            what = "an integer or null" if allow_none else "an integer"
            raise self.fail(key, f"expected {what}, got {_show(raw)}")
        if minimum is not None and raw < minimum:
            raise self.fail(key, f"must be >= {minimum}, got {raw}")
        if maximum is not None and raw > maximum:
            raise self.fail(key, f"must be <= {maximum}, got {raw}")
        return raw

    def number(self, raw: Any, key: str, low: float, high: float) -> float:
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise self.fail(key, f"expected a number, got {_show(raw)}")
        if not low <= raw <= high:
            raise self.fail(key, f"must lie in [{low}, {high}], got {raw}")
        return float(raw)

    def budget(self, raw: Any, key: str) -> int | float:
        """A count (integer >= 1) or a share of a pool (a number in (0, 1]): tcl.budget's rule."""
        try:
            return check_budget(raw)
        except TclError as e:
            raise self.fail(key, str(e)) from None

    def boolean(self, raw: Any, key: str) -> bool:
        if not isinstance(raw, bool):
            raise self.fail(key, f"expected true or false, got {_show(raw)}")
        return raw

    def names(self, raw: Any, key: str, known, what: str) -> tuple[str, ...]:
        if not isinstance(raw, list) or not raw:
            raise self.fail(key, f"expected a non-empty list of {what}s, got {_show(raw)}")
        seen = set()
        for i, name in enumerate(raw):
            if not isinstance(name, str):
                raise self.fail(f"{key}[{i}]", f"expected a {what} name, got {_show(name)}")
            if known is not None and name not in known:
                raise self.fail(f"{key}[{i}]", f"unknown {what} {name!r} "
                                               f"(known: {', '.join(sorted(known))})")
            if name in seen:
                raise self.fail(f"{key}[{i}]", f"{what} {name!r} is listed twice")
            seen.add(name)
        return tuple(raw)


def _show(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}" if value is not None else "nothing (null)"


TOP_KEYS = ("data", "devices", "zoo", "sample", "measure", "train", "select", "evaluate",
            "continual", "add_device", "scale_out")


def parse_params(raw: Any, source: Path, check_models: bool = True) -> Params:
    """Validate the parsed YAML ``raw`` of ``source``; see the module docstring."""
    # lazy: the CLI's parser reads this module's constants at every start: with the registries
    # below at module top (numpy, polars, pyarrow) that start took ~1.1 s instead of ~0.2 s,
    # and the networks import torch (~3 s)
    from ..dataset import SOURCES
    from ..models import MODEL_KINDS
    from ..sampling import MAX_PROGRAMS_PER_TASK
    from ..store.devices import DeviceRegistry
    from ..zoo.networks import NETWORKS
    from ..zoo.user import user_networks

    r = _Reader(source.name if source.name == DEFAULT_FILE else str(source))
    _check_finite(r, raw)
    top = r.section(raw, "", TOP_KEYS)
    if not isinstance(top["data"], str) or not top["data"].strip():
        raise r.fail("data", f"expected the data root as a path, got {_show(top['data'])}")
    data = top["data"]
    try:
        root = data_paths(source, data).root
    except TclError as e:
        raise r.fail("data", str(e)) from None
    if root.exists() and not root.is_dir():
        raise r.fail("data", f"{root} is a file; the data root is a directory")
    registry = DeviceRegistry(data_paths(source, data))
    try:
        known_devices = set(registry.all())
    except TclError as e:
        raise r.fail("devices", str(e)) from None
    devices = r.names(top["devices"], "devices", known_devices, "device")

    z = r.section(top["zoo"], "zoo", ("networks", "small", "factory_timeout_s"))
    try:
        users = user_networks(data_paths(source, data))
    except TclError as e:
        raise r.fail("zoo.networks", str(e)) from None
    zoo = ZooParams(r.names(z["networks"], "zoo.networks", set(NETWORKS) | set(users), "network"),
                    r.boolean(z["small"], "zoo.small"),
                    r.number(z["factory_timeout_s"], "zoo.factory_timeout_s",
                             *FACTORY_TIMEOUT_RANGE))

    s = r.section(top["sample"], "sample",
                  ("programs_per_task", "max_train_tasks", "max_holdout_tasks", "seed"))
    sample = SampleParams(
        r.integer(s["programs_per_task"], "sample.programs_per_task", 1,
                  maximum=MAX_PROGRAMS_PER_TASK),
        r.integer(s["max_train_tasks"], "sample.max_train_tasks", 1, allow_none=True),
        r.integer(s["max_holdout_tasks"], "sample.max_holdout_tasks", 1, allow_none=True),
        r.integer(s["seed"], "sample.seed", 0, maximum=MAX_SEED))

    m = r.section(top["measure"], "measure", ("batch_size", "pipelined", "retries",
                                               "retry_delay_s"))
    measure = MeasureParams(r.integer(m["batch_size"], "measure.batch_size", 1, maximum=4096),
                            r.boolean(m["pipelined"], "measure.pipelined"),
                            r.integer(m["retries"], "measure.retries", 0, maximum=100),
                            r.number(m["retry_delay_s"], "measure.retry_delay_s", 0, 86400))

    t = r.section(top["train"], "train",
                  ("models", "valid_fraction", "seed", "seeds", "sources", "hyper"))
    # "continual" models are made by `tcl distill` (the continual section), not trained here
    models = r.names(t["models"], "train.models", set(MODEL_KINDS) - {"continual"},
                     "model kind")
    hyper_raw = t["hyper"]
    if not isinstance(hyper_raw, dict):
        raise r.fail("train.hyper", f"expected a mapping of model kind to hyperparameters, "
                                    f"got {_show(hyper_raw)}")
    hyper: dict[str, dict[str, Any]] = {}
    for kind, values in hyper_raw.items():
        key = f"train.hyper.{kind}"
        if kind not in MODEL_KINDS:
            raise r.fail(key, f"unknown model kind {kind!r} (known: {', '.join(MODEL_KINDS)})")
        if values is None:
            values = {}
        if not isinstance(values, dict):
            raise r.fail(key, f"expected a mapping of hyperparameters, got {_show(values)}")
        for name, value in values.items():
            if name == "seed":
                raise r.fail(f"{key}.seed", "set the seed once, as train.seed")
            if not isinstance(value, (int, float, str, bool, type(None), list)):
                raise r.fail(f"{key}.{name}", f"expected a plain value, got {_show(value)}")
        hyper[str(kind)] = dict(values)
    for i, kind in enumerate(models):
        if kind not in hyper:
            raise r.fail(f"train.hyper.{kind}", f"missing value for train.models[{i}] "
                                                f"(write `{kind}: {{}}` for the defaults)")
    train = TrainParams(models, r.number(t["valid_fraction"], "train.valid_fraction", 0.0, 0.9),
                        r.integer(t["seed"], "train.seed", 0, maximum=MAX_SEED), hyper,
                        r.integer(t["seeds"], "train.seeds", 1, maximum=20),
                        r.names(t["sources"], "train.sources", set(SOURCES), "source"))
    last = train.seed_list[-1]   # the seeds run from train.seed up
    if last > MAX_SEED:
        raise r.fail("train.seed", f"must be <= {MAX_SEED - train.seeds + 1} with train.seeds "
                                   f"{train.seeds} (its seeds would run to {last}; the largest "
                                   f"seed is {MAX_SEED})")

    select = _select_params(r, top["select"], devices, known_devices, train)

    e = r.section(top["evaluate"], "evaluate", ("top_k",))
    if not isinstance(e["top_k"], list) or not e["top_k"]:
        raise r.fail("evaluate.top_k", f"expected a non-empty list of integers, "
                                       f"got {_show(e['top_k'])}")
    top_k = tuple(r.integer(k, f"evaluate.top_k[{i}]", 1, maximum=1000)
                  for i, k in enumerate(e["top_k"]))

    continual = _continual_params(r, top["continual"], known_devices,
                                  devices + select.devices, train)
    a = r.section(top["add_device"], "add_device", ("eval_programs_per_task", "refresh_cron"))
    cron = _cron(r, a["refresh_cron"], "add_device.refresh_cron")
    add_device = AddDeviceParams(
        r.integer(a["eval_programs_per_task"], "add_device.eval_programs_per_task", 1,
                  maximum=MAX_PROGRAMS_PER_TASK), cron)
    params = Params(source.resolve(), data, devices, zoo, sample, measure, train, select,
                    EvaluateParams(top_k), continual, add_device,
                    _scale_out_params(r, top["scale_out"]))
    if check_models:
        check_model_params(params, r)
    return params


def _check_finite(r: _Reader, raw: Any) -> None:
    """Refuse a NaN or infinite number anywhere in the file, naming its key: YAML reads `.nan`
    and `.inf` as floats, which pass type checks and comparisons a range check skips (a NaN
    `train.hyper.xgb.eta` trained a model whose every prediction was NaN)."""
    todo: list[tuple[str, Any]] = [("", raw)]
    while todo:   # a loop, not recursion: the file's depth is the user's
        key, value = todo.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise r.fail(key, f"expected a finite number, got {value}")
        if isinstance(value, dict):
            todo += [(f"{key}.{k}" if key else str(k), v) for k, v in value.items()]
        elif isinstance(value, list):
            todo += [(f"{key}[{i}]", v) for i, v in enumerate(value)]


def _cron(r: _Reader, cron: Any, key: str) -> str:
    """A cron line of 5 fields that Prefect takes, by Prefect's own rule (its
    ``validate_cron_string``: its croniter, no random or hashed fields), so a line `tcl params`
    passes is one `tcl serve` serves."""
    expected = "expected a cron line of 5 fields such as '0 3 * * *'"
    if not isinstance(cron, str) or len(cron.split()) != 5:
        raise r.fail(key, f"{expected}, got {_show(cron)}")
    if not _prefect_croniter().is_valid(cron) or \
            any(f.casefold() in ("r", "h") for f in cron.split()):
        raise r.fail(key, f"{expected}, got {cron!r}, which Prefect refuses")
    return cron


@lru_cache(maxsize=1)
def _prefect_croniter():
    """Prefect's croniter (``prefect._vendor.croniter``), loaded from its file: importing any
    module of prefect would fix Prefect's settings before ``tcl.pipeline.prefect_setup`` has set
    its defaults (and costs ~1 s)."""
    package = importlib.util.find_spec("prefect")   # finds it, imports nothing
    path = Path(package.origin).parent / "_vendor" / "croniter" / "croniter.py"
    spec = importlib.util.spec_from_file_location("tcl_prefect_croniter", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.croniter


def _scale_out_params(r: _Reader, raw: Any) -> ScaleOutParams:
    s = r.section(raw, "scale_out", ("task_runner", "dask_address", "dask_workers"))
    if s["task_runner"] not in ("local", "dask"):
        raise r.fail("scale_out.task_runner", f"expected local or dask, "
                                              f"got {_show(s['task_runner'])}")
    address = s["dask_address"]
    if address is not None and (not isinstance(address, str) or "://" not in address):
        raise r.fail("scale_out.dask_address", f"expected null (a LocalCluster here) or a "
                                               f"scheduler address such as "
                                               f"tcp://10.0.0.5:8786, got {_show(address)}")
    return ScaleOutParams(s["task_runner"], address,
                          r.integer(s["dask_workers"], "scale_out.dask_workers", 1, maximum=256))


def _select_params(r: _Reader, raw: Any, devices: tuple[str, ...], known: set[str],
                   train: TrainParams) -> SelectParams:
    from ..samplers import SAMPLERS   # lazy: numpy, see parse_params

    s = r.section(raw, "select", ("devices", "sampler", "budget", "rounds", "weights",
                                  "per_task", "teacher", "seed"))
    chosen = () if s["devices"] == [] else r.names(s["devices"], "select.devices", known,
                                                    "device")
    for i, d in enumerate(chosen):
        if d in devices:
            raise r.fail(f"select.devices[{i}]", f"device {d!r} is also in devices (measured "
                                                 "in full); a device is one or the other")
    if not isinstance(s["sampler"], str) or s["sampler"] not in SAMPLERS:
        raise r.fail("select.sampler", f"unknown sampler {s['sampler']!r} "
                                       f"(known: {', '.join(SAMPLERS)})")
    budget = r.budget(s["budget"], "select.budget")
    w = r.section(s["weights"], "select.weights", ("r", "d", "u"))
    weights = {k: r.number(w[k], f"select.weights.{k}", 0.0, 100.0) for k in ("r", "d", "u")}
    teacher = s["teacher"]
    dev, _, kind = str(teacher).partition("/")
    if not isinstance(teacher, str) or dev not in devices or kind not in train.models:
        raise r.fail("select.teacher", f"expected DEVICE/KIND of a trained model (a device of "
                                       f"devices, a kind of train.models), got {_show(teacher)}")
    return SelectParams(chosen, s["sampler"], budget,
                        r.integer(s["rounds"], "select.rounds", 1, maximum=100), weights,
                        r.boolean(s["per_task"], "select.per_task"), teacher,
                        r.integer(s["seed"], "select.seed", 0, maximum=MAX_SEED))


def _continual_params(r: _Reader, raw: Any, known: set[str], measured: tuple[str, ...],
                      train: TrainParams) -> ContinualParams:
    c = r.section(raw, "continual", ("first", "then", "backbone", "method", "subset",
                                     "subset_from", "kd_new", "kd_old", "ewc", "seed"))
    sequence = _sequence(r, c["first"], c["then"], known, measured)
    if not isinstance(c["backbone"], str) or c["backbone"] not in BACKBONES:
        raise r.fail("continual.backbone", f"expected one of {', '.join(BACKBONES)}, "
                                           f"got {_show(c['backbone'])}")
    if not isinstance(c["method"], str) or c["method"] not in DISTILLERS:
        raise r.fail("continual.method", f"unknown method {c['method']!r} "
                                         f"(known: {', '.join(DISTILLERS)})")
    subset = r.budget(c["subset"], "continual.subset")
    if not isinstance(c["subset_from"], str) or \
            c["subset_from"] not in ("measured", "selections"):
        raise r.fail("continual.subset_from", f"expected measured or selections, "
                                              f"got {_show(c['subset_from'])}")
    return ContinualParams(
        sequence, c["backbone"], c["method"], subset, c["subset_from"],
        *(r.number(c[k], f"continual.{k}", 0.0, 1000.0) for k in ("kd_new", "kd_old", "ewc")),
        r.integer(c["seed"], "continual.seed", 0, maximum=MAX_SEED))


def _sequence(r: _Reader, first: Any, then: Any, known: set[str],
              measured: tuple[str, ...]) -> tuple[str, ...]:
    """``first`` then the devices of ``then`` (device: teacher), each teacher the device just
    before it: the latest model serves every device before it, so skipping one would drop its
    head. The teacher is spelled out because each device is a DVC stage that depends on its
    teacher's stage. Every device of the sequence is one the pipeline measures (``measured``:
    devices and select.devices), so its distill stage has records to depend on."""
    if not isinstance(first, str) or first not in known:
        raise r.fail("continual.first", f"expected a device name (known: "
                                        f"{', '.join(sorted(known))}), got {_show(first)}")
    if not isinstance(then, dict):
        raise r.fail("continual.then", f"expected a mapping of each later device to its teacher "
                                       f"(device: teacher; {{}} for none), got {_show(then)}")
    order = [first]
    for device, teacher in then.items():
        key = f"continual.then.{device}"
        if device not in known:
            raise r.fail(key, f"unknown device {device!r} (known: {', '.join(sorted(known))})")
        if device in order:
            raise r.fail(key, f"device {device!r} is already in the sequence")
        if teacher == device:
            raise r.fail(key, f"device {device!r} cannot be its own teacher")
        if teacher in then and teacher not in order:
            raise r.fail(key, f"device {device!r} comes before its teacher {teacher!r}: move "
                              f"it after {teacher!r} (a teacher's model must exist first)")
        if teacher != order[-1]:
            raise r.fail(key, f"expected the device just before it, {order[-1]!r}, as "
                              f"{device!r}'s teacher, got {_show(teacher)} (the latest model "
                              "is the one that serves every earlier device)")
        order.append(device)
    for i, device in enumerate(order):
        if device not in measured:
            raise r.fail("continual.first" if i == 0 else f"continual.then.{device}",
                         f"device {device!r} is not one the pipeline measures (devices or "
                         f"select.devices: {', '.join(measured)}); add it there or leave it "
                         "out of the sequence")
    return tuple(order)


def check_model_params(params: Params, reader: _Reader | None = None) -> None:
    """Build every listed model once (untrained) so a rejected hyperparameter fails now."""
    from ..models import make_model   # lazy: numpy, see parse_params

    r = reader or _Reader(params.source.name)
    for i, kind in enumerate(params.train.models):
        try:
            make_model(kind, **params.train.hyper_of(kind), seed=params.train.seed)
        except TclError as e:
            raise r.fail(f"train.hyper.{kind}", str(e)) from None
        except Exception as e:  # a constructor rejecting a value (ValueError, ...)
            raise r.fail(f"train.hyper.{kind}", f"{type(e).__name__}: {e}") from None


def load_params(path: str | Path = DEFAULT_FILE, check_models: bool = True) -> Params:
    """Read and validate a params file (see the module docstring); nothing else is done."""
    path = Path(path)
    resolved(path, "params file")   # a NUL byte, links that loop: named
    if not path.exists():
        raise TclError(f"params file {path} does not exist (copy the project's params.yaml)")
    if path.is_file() and path.stat().st_size > MAX_FILE_BYTES:
        raise TclError(f"params file {path} is {path.stat().st_size} bytes; a params file is "
                       f"at most {MAX_FILE_BYTES} bytes")
    text = read_text(path, "params file")
    try:
        _check_expansion(yaml.compose(text, Loader=yaml.SafeLoader), path)
        raw = yaml.load(text, Loader=_UniqueKeyLoader)
    except _KeyTwice as e:
        raise TclError(f"params file {path}: key {e.key!r} is given twice (lines {e.first} and "
                       f"{e.second}); keep one (YAML would silently take the last)") from None
    except yaml.YAMLError as e:
        raise TclError(f"{path}: not valid YAML: {e}") from None
    except RecursionError:
        raise TclError(f"params file {path} nests its values too deeply; a params file is a "
                       "page of knobs") from None
    return parse_params(raw, path, check_models=check_models)


class _KeyTwice(yaml.YAMLError):
    def __init__(self, key: Any, first: int, second: int) -> None:
        super().__init__(f"key {key!r} given twice")
        self.key, self.first, self.second = key, first, second


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping key given twice (``_KeyTwice``, with both lines);
    plain YAML keeps the last one silently. Keys merged in by ``<<`` may be overridden."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key, line = self.construct_object(key_node, deep=True), key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise _KeyTwice(key, seen[key], line)
                seen[key] = line
            except TypeError:   # an unhashable key: SafeLoader's own error names it
                continue
        return super().construct_mapping(node, deep=deep)


def _check_expansion(root: yaml.Node | None, path: Path) -> None:
    """Refuse YAML whose aliases expand to more than MAX_EXPANDED_NODES nodes, or refer to
    themselves. Counted on the node graph, once per distinct node, so nothing is expanded."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_:
            raise TclError(f"params file {path}: an alias refers to itself (line "
                           f"{node.start_mark.line + 1}); a params file is a tree of values")
        open_.add(key)
        children = node.value if isinstance(node, yaml.SequenceNode) else \
            [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else []
        total = 1
        for child in children:
            total += size(child)
            if total > MAX_EXPANDED_NODES:
                raise TclError(f"params file {path}: its aliases expand to more than "
                               f"{MAX_EXPANDED_NODES} values (line {node.start_mark.line + 1}); "
                               "a params file is a page of knobs")
        open_.discard(key)
        sizes[key] = total
        return total

    if root is not None:
        size(root)

