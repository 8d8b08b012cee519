"""Where tcl keeps its data. One place for every path, so the CLI, flows and tests agree."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


class TclError(Exception):
    """An error the user can act on: the message names what was wrong and what was expected."""


def one_line(text: object) -> str:
    """``text`` as one line (its lines joined by " | "): how every error reaches a terminal."""
    return " | ".join(line.strip() for line in str(text).strip().splitlines() if line.strip())


def read_text(path: Path, what: str) -> str:
    """The UTF-8 text of ``path``, the ``what`` (e.g. "params file") the user gave; a file that
    is not UTF-8, or a directory, is a TclError naming it. Every text file tcl reads goes
    through here."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise TclError(f"{what} {path} is not UTF-8 text (byte {e.object[e.start]:#04x} at "
                       f"offset {e.start}); save it as UTF-8") from None
    except IsADirectoryError:
        raise TclError(f"{what} {path} is a directory; expected a file") from None


@dataclass(frozen=True)
class Paths:
    """The layout of one data root (``data/`` of the project by default)."""

    root: Path

    @classmethod
    def default(cls) -> "Paths":
        return cls(Path(os.environ.get("TCL_DATA", "data")).resolve())

    @property
    def devices_file(self) -> Path:
        return self.root / "devices.json"

    @property
    def user_networks_file(self) -> Path:
        """The user's own networks (``tcl zoo add``)."""
        return self.root / "user_networks.json"

    @property
    def zoo_dir(self) -> Path:
        return self.root / "zoo"

    @property
    def tasks_file(self) -> Path:
        return self.zoo_dir / "tasks.parquet"

    @property
    def networks_file(self) -> Path:
        return self.zoo_dir / "networks.parquet"

    @property
    def imported_tasks_file(self) -> Path:
        """The tasks of imported JSONDatabase files that the zoo lacks (``tcl import``)."""
        return self.zoo_dir / "imported_tasks.parquet"

    @property
    def candidates_dir(self) -> Path:
        return self.root / "candidates"

    def candidates_file(self, task_id: str) -> Path:
        """The task's sampled candidate programs (``tcl.sampling``)."""
        return self.candidates_dir / f"task={task_id}.parquet"

    @property
    def records_dir(self) -> Path:
        return self.root / "records"

    @property
    def retired_dir(self) -> Path:
        """Records taken out of use (``tcl retire``), kept readable in the same layout."""
        return self.root / "retired"

    @property
    def retired_log(self) -> Path:
        """One line per ``tcl retire``: device, cut-off, reason, files and records moved."""
        return self.retired_dir / "log.jsonl"

    @property
    def features_dir(self) -> Path:
        return self.root / "features"

    def features_file(self, task_id: str) -> Path:
        """The task's cached program features (``tcl.features``)."""
        return self.features_dir / f"task={task_id}.parquet"

    @property
    def models_dir(self) -> Path:
        return self.root / "models"

    def model_file(self, device: str, kind: str, index: int = 0) -> Path:
        """The trained model of ``kind`` for ``device``; ``index`` > 0: the extra training
        seeds' (``tcl.train``)."""
        if index:
            return self.seeds_dir(device, kind) / f"s{index}.model"
        return self.models_dir / device / f"{kind}.model"

    def train_info_file(self, device: str, kind: str, index: int = 0) -> Path:
        """What that model's training fitted on and how long it took."""
        return self.model_file(device, kind, index).with_suffix(".json")

    def seeds_dir(self, device: str, kind: str) -> Path:
        """Where the models of the training seeds after the first live (``train.seeds``)."""
        return self.models_dir / device / f"{kind}.seeds"

    @property
    def registry_file(self) -> Path:
        """The model registry's table (``tcl.registry``)."""
        return self.models_dir / "registry.duckdb"

    @property
    def registry_dir(self) -> Path:
        """The registry's model files, by content id."""
        return self.models_dir / "registry"

    @property
    def reports_dir(self) -> Path:
        return self.root / "reports"

    def continual_report(self, device: str) -> Path:
        """The device's latest continual model and its metrics (``tcl stage distill``)."""
        return self.reports_dir / "continual" / f"{device}.json"

    def continual_metrics(self, device: str) -> Path:
        """Its headline figures, one flat row of ``dvc metrics show``."""
        return self.reports_dir / "continual" / f"{device}.metrics.json"

    @property
    def scores_dir(self) -> Path:
        """The evaluation's mean figures, one file (one row of ``dvc metrics show``) per device
        and model: ``<device>/<model>.json``."""
        return self.reports_dir / "by-model"

    def add_device_plot(self, device: str) -> Path:
        """The add-device run's plot (its Prefect artifact)."""
        return self.reports_dir / "add-device" / f"{device}.png"

    @property
    def stages_file(self) -> Path:
        """Each stage's start, end and CPU seconds of the last whole-pipeline run
        (``flows.pipeline``; ``benchmarks/main_job.py`` reports it)."""
        return self.reports_dir / "pipeline-stages.json"

    @property
    def catalog_file(self) -> Path:
        return self.root / "tcl.duckdb"

    @property
    def failures_file(self) -> Path:
        """Devices whose add-device run failed (``tcl.pipeline.status``)."""
        return self.root / "device-failures.json"

    @property
    def selections_dir(self) -> Path:
        """Which sampler and round chose each measured program (``tcl.store.selections``)."""
        return self.root / "selections"

    @property
    def tuning_dir(self) -> Path:
        """``tcl tune`` runs, one directory each."""
        return self.root / "tuning"

    def remeasure_root(self, device: str) -> "Paths":
        """The data card's second measurement of ``device``: a data root of its own, apart from
        the store."""
        return Paths(self.root / "remeasure" / device)

    @property
    def locks_dir(self) -> Path:
        return self.root / ".locks"

    @property
    def logs_dir(self) -> Path:
        """The last run of each flow, with its tracebacks (the terminal shows one line)."""
        return self.root / ".logs"

    @property
    def cache_dir(self) -> Path:
        """What can be rebuilt from the store (record file stamps, the catalog file's note)."""
        return self.root / ".cache"

    @property
    def record_files_cache(self) -> Path:
        """The record files already checked, by size and mtime (``tcl.store.records``)."""
        return self.cache_dir / "record-files.json"

    @property
    def catalog_note(self) -> Path:
        """What the catalog file was last written from (``tcl.store.catalog``)."""
        return self.cache_dir / "catalog.json"

    @property
    def prefect_home(self) -> Path:
        """Prefect's local state (ephemeral API database, logs) when PREFECT_HOME is not set:
        beside the data it ran on, never inside the installed package."""
        return self.root / ".prefect"
