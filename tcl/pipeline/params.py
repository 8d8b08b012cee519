"""The pipeline's knobs: ``params.yaml`` loaded and validated into dataclasses.

Every stage (``tcl stage ...``, the DVC stages, the Prefect flows) starts with ``load_params``,
which checks the whole file before any work. Each section declares the rule of each of its
knobs beside its fields (``_parameter_constraints``, after scikit-learn's; the rules are
``tcl.pipeline.constraints``), and a rule across knobs sits on the later one. Unknown keys,
missing keys, wrong types, values out of range, unknown devices, networks and model kinds, NaN
or infinite numbers, and hyperparameters a model rejects all raise a ``TclError`` naming the
key, e.g. ``params.yaml: train.models[1]: unknown model kind 'foo' (known: ...)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..config import MAX_SEED, Paths, TclError, read_text, resolved
from ..zoo import DEFAULT_FACTORY_TIMEOUT_S, FACTORY_TIMEOUT_RANGE
from .constraints import (All, Boolean, Budget, Integer, ListOf, Names, Number, OneOf, Refused,
                          Rule, Section)
from .params_rules import (Cron, DaskAddress, DataRoot, FirstDevice, Hyper, Known, LaterDevices,
                           NotMeasuredInFull, SeedsFit, Teacher, data_paths)
from .params_yaml import read_yaml

DEFAULT_FILE = "params.yaml"
# A params file is a page of knobs: larger files are refused before they are read.
MAX_FILE_BYTES = 1 << 20


@dataclass(frozen=True)
class ZooParams:
    networks: tuple[str, ...]   # names in tcl.zoo.networks.NETWORKS
    small: bool                 # reduced input shapes (tests)
    factory_timeout_s: float = DEFAULT_FACTORY_TIMEOUT_S  # a user network's factory (zoo add)

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "networks": Names("network", "networks"),
        "small": Boolean(),
        "factory_timeout_s": Number(*FACTORY_TIMEOUT_RANGE),
    }


@dataclass(frozen=True)
class SampleParams:
    programs_per_task: int      # candidates sampled, and measured on every device, per task
    max_train_tasks: int | None    # N training tasks, stratified by operator class (None: all)
    max_holdout_tasks: int | None  # N held-out tasks, stratified the same way (None: all)
    seed: int

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "programs_per_task": Integer(1, "max programs per task"),
        "max_train_tasks": Integer(1, None, null=True),
        "max_holdout_tasks": Integer(1, None, null=True),
        "seed": Integer(0, MAX_SEED),
    }


@dataclass(frozen=True)
class MeasureParams:
    batch_size: int             # programs built, then run, per batch (batches span tasks)
    pipelined: bool             # build the next batch while this one runs, where a core is free
    retries: int                # Prefect retries of a device's measurement after a transient error
    retry_delay_s: float

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "batch_size": Integer(1, 4096),
        "pipelined": Boolean(),
        "retries": Integer(0, 100),
        "retry_delay_s": Number(0, 86400),
    }


@dataclass(frozen=True)
class TrainParams:
    models: tuple[str, ...]     # kinds in tcl.models.MODEL_KINDS
    valid_fraction: float       # share of the training tasks kept for early stopping
    seed: int                   # validation split and every model's seed
    hyper: dict[str, dict[str, Any]] = field(default_factory=dict)  # kind -> make_model kwargs
    seeds: int = 1              # models per kind and device: seeds seed, seed + 1, ...; the
                                # report gives each figure as mean and standard error over them
    sources: tuple[str, ...] | None = None   # records learned from (tcl.dataset.SOURCES); None: all

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        # "continual" models are made by `tcl distill` (the continual section), not trained here
        "models": Names("model kind", "trainable model kinds"),
        "valid_fraction": Number(0.0, 0.9),
        "seed": Integer(0, MAX_SEED),
        "seeds": All(Integer(1, 20), SeedsFit()),
        "sources": Names("source", "sources"),
        "hyper": Hyper(),
    }

    @property
    def seed_list(self) -> list[int]:
        """The training seeds; the first one's model is the one served (``<kind>.model``)."""
        return [self.seed + i for i in range(self.seeds)]

    def hyper_of(self, kind: str) -> dict[str, Any]:
        """The kind's ``make_model`` keyword arguments (the seed is ``seed``, given apart)."""
        return dict(self.hyper.get(kind, {}))


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

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "devices": All(Names("device", "registered devices", empty=True), NotMeasuredInFull()),
        "sampler": OneOf("samplers", what="sampler"),
        "budget": Budget(),
        "rounds": Integer(1, 100),
        "weights": Section({k: Number(0.0, 100.0) for k in ("r", "d", "u")}),
        "per_task": Boolean(),
        "teacher": Teacher(),
        "seed": Integer(0, MAX_SEED),
    }


@dataclass(frozen=True)
class EvaluateParams:
    top_k: tuple[int, ...]

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "top_k": ListOf(Integer(1, 1000), "integers"),
    }


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

    # the file's keys: first and then make the sequence
    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "first": FirstDevice(),
        "then": LaterDevices(),
        "backbone": OneOf("backbones"),
        "method": OneOf("distillers", what="method"),
        "subset": Budget(),
        "subset_from": OneOf(("measured", "selections")),
        "kd_new": Number(0.0, 1000.0),
        "kd_old": Number(0.0, 1000.0),
        "ewc": Number(0.0, 1000.0),
        "seed": Integer(0, MAX_SEED),
    }


@dataclass(frozen=True)
class AddDeviceParams:
    eval_programs_per_task: int  # a new device's evaluation set: candidates per held-out task
    refresh_cron: str            # `tcl serve`: when the refresh deployment runs (cron, UTC)

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "eval_programs_per_task": Integer(1, "max programs per task"),
        "refresh_cron": Cron(),
    }


@dataclass(frozen=True)
class ScaleOutParams:
    task_runner: str             # "local": this process; "dask": a Dask cluster (prefect-dask)
    dask_address: str | None     # with dask: None starts a LocalCluster, else the scheduler
    dask_workers: int            # LocalCluster workers (one thread each)

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "task_runner": OneOf(("local", "dask")),
        "dask_address": DaskAddress(),
        "dask_workers": Integer(1, 256),
    }


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

    # the file's top level, in the order it is checked (source is where the file is)
    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "data": DataRoot(),
        "devices": Names("device", "registered devices"),
        "zoo": Section.of(ZooParams),
        "sample": Section.of(SampleParams),
        "measure": Section.of(MeasureParams),
        "train": Section.of(TrainParams),
        "select": Section.of(SelectParams),
        "evaluate": Section.of(EvaluateParams),
        "continual": Section.of(ContinualParams),
        "add_device": Section.of(AddDeviceParams),
        "scale_out": Section.of(ScaleOutParams),
    }

    @property
    def paths(self) -> Paths:
        return data_paths(self.source, self.data)


def parse_params(raw: Any, source: Path, check_models: bool = True) -> Params:
    """Validate the parsed YAML ``raw`` of ``source``; see the module docstring."""
    name = source.name if source.name == DEFAULT_FILE else str(source)
    try:
        _check_finite(raw)
        top = Section.of(Params).check(raw, "", Known(source))
        c = top["continual"]
        continual = ContinualParams(sequence=(c.pop("first"), *c.pop("then")), **c)
        params = Params(source.resolve(), top["data"], top["devices"], ZooParams(**top["zoo"]),
                        SampleParams(**top["sample"]), MeasureParams(**top["measure"]),
                        TrainParams(**top["train"]), SelectParams(**top["select"]),
                        EvaluateParams(**top["evaluate"]), continual,
                        AddDeviceParams(**top["add_device"]), ScaleOutParams(**top["scale_out"]))
        if check_models:
            check_model_params(params)
    except Refused as e:
        raise TclError(f"{name}: {e}") from None
    return params


def _check_finite(raw: Any) -> None:
    """Refuse a NaN or infinite number anywhere in the file, naming its key: YAML reads `.nan`
    and `.inf` as floats, which pass type checks and comparisons a range check skips (a NaN
    `train.hyper.xgb.eta` trained a model whose every prediction was NaN)."""
    todo: list[tuple[str, Any]] = [("", raw)]
    while todo:   # a loop, not recursion: the file's depth is the user's
        key, value = todo.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise Refused(key, f"expected a finite number, got {value}")
        if isinstance(value, dict):
            todo += [(f"{key}.{k}" if key else str(k), v) for k, v in value.items()]
        elif isinstance(value, list):
            todo += [(f"{key}[{i}]", v) for i, v in enumerate(value)]


def check_model_params(params: Params) -> None:
    """Build every listed model once (untrained) so a rejected hyperparameter fails now."""
    from ..models import make_model   # lazy: numpy, see Known

    for kind in params.train.models:
        try:
            make_model(kind, **params.train.hyper_of(kind), seed=params.train.seed)
        except TclError as e:
            raise Refused(f"train.hyper.{kind}", str(e)) from None
        except Exception as e:  # a constructor rejecting a value (ValueError, ...)
            raise Refused(f"train.hyper.{kind}", f"{type(e).__name__}: {e}") from None


def load_params(path: str | Path = DEFAULT_FILE, check_models: bool = True) -> Params:
    """Read and validate a params file (see the module docstring); nothing else is done."""
    path = Path(path)
    resolved(path, "params file")   # a NUL byte, links that loop: named
    if not path.exists():
        raise TclError(f"params file {path} does not exist (copy the project's params.yaml)")
    if path.is_file() and path.stat().st_size > MAX_FILE_BYTES:
        raise TclError(f"params file {path} is {path.stat().st_size} bytes; a params file is "
                       f"at most {MAX_FILE_BYTES} bytes")
    raw = read_yaml(read_text(path, "params file"), path)
    return parse_params(raw, path, check_models=check_models)
