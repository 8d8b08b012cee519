"""Where tcl keeps its data. One place for every path, so the CLI, flows and tests agree."""
from __future__ import annotations

import argparse
import errno
import os
import re
import resource
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


class TclError(Exception):
    """An error the user can act on: the message names what was wrong and what was expected."""


# The largest seed anything takes, typed (--seed) or in params.yaml (*.seed): numpy's range
# (np.random.seed, default_rng), 0 .. 2**32 - 1.
MAX_SEED = 2**32 - 1


def one_line(text: object) -> str:
    """``text`` as one line (its lines joined by " | "): how every error reaches a terminal."""
    return " | ".join(line.strip() for line in str(text).strip().splitlines() if line.strip())


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the problem (and where to read more): the
    parser of every command line tcl reads (``tcl``, ``python -m flows.X``)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


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


@contextmanager
def atomic_write(path: Path, what: str) -> Iterator[Path]:
    """A temporary path beside ``path`` for the block to write; once it has, the file is
    fsynced and renamed onto ``path``, so a reader (or a killed writer's next run) sees the old
    file or the whole new one. On any failure the temporary file is removed, and a full disk or
    the file-size limit is a TclError naming ``path``, the ``what`` (e.g. "record file"),
    whatever the writing library made of it.

    Every file that tcl, flows/ and benchmarks/ write whole goes through here (``write_text``,
    ``write_json`` and ``save_figure`` for text, JSON and plots; a library's writer is given the
    temporary path). The writers that do not, and why:
    - logs and appended lines, written as they come so that a killed run keeps what it did:
      the logs (``.logs/``, the Prefect server's, the main job's), the retired records' log, a
      tuning run's curve points and the benchmarks' result lines;
    - the store catalog's note (``tcl.store.catalog``), plain on purpose: a torn note fails to
      parse and costs one rebuild, and a failed write must not fail the query that made it;
    - a built library handed to MetaSchedule's runner (``tcl.measure.builder``), written into a
      fresh temporary directory of its own that nothing reads before the write returns;
    - two writers in ``tcl/models``, which is fitting code (``tcl.train.fit_key`` hashes it,
      so a change there makes every committed model again): ``stream.write_parquet`` streams row
      groups to the scratch file its caller names (a benchmark, a test), and ``convert_file``
      copies the original to ``<file>.pre-convert`` before it replaces it (itself atomically)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp-{uuid.uuid4().hex}-{path.name}"
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        fd = os.open(path.parent, os.O_RDONLY)   # the rename itself survives a power loss
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except TclError:
        raise
    except Exception as e:
        why = disk_problem(e, tmp)
        if why is None:
            raise
        raise TclError(f"cannot write {what} {path}: {why}; it is left as it was (no partial "
                       "file): make room, then run the command again") from None
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: Path, text: str, what: str) -> None:
    """``text`` as UTF-8, written whole (``atomic_write``)."""
    with atomic_write(path, what) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: Path, value: object, what: str) -> None:
    """``value`` as indented, key-sorted JSON text, written whole (``atomic_write``)."""
    import json

    write_text(path, json.dumps(value, indent=2, sort_keys=True, default=str) + "\n", what)


def save_figure(fig, path: Path, what: str, **options) -> Path:
    """A matplotlib figure saved whole to ``path`` (``atomic_write``; the format from its
    suffix), ``options`` passed to ``savefig`` (dpi ...)."""
    path = Path(path)
    with atomic_write(path, what) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or None, **options)
    return path


def disk_problem(error: BaseException, written: Path) -> str | None:
    """What stopped a write of ``written`` when it was the disk: no space left, or the file
    size limit (``ulimit -f``; Python ignores SIGXFSZ, so the write fails with EFBIG instead of
    killing the process); None for any other failure. Libraries report these in their own
    words or drop errno (polars' ComputeError, torch's "enforce fail", TVM's unchecked
    streams), so the disk itself is looked at too, before the temporary file goes."""
    code, text = getattr(error, "errno", None), str(error)
    full = "no space left on the device"
    if code in (errno.ENOSPC, errno.EDQUOT) or "No space left" in text or "os error 28" in text:
        return full
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    size = written.stat().st_size if written.exists() else 0
    if code == errno.EFBIG or "File too large" in text or "os error 27" in text or (
            limit != resource.RLIM_INFINITY and size >= limit):
        shown = "" if limit == resource.RLIM_INFINITY else f" of {limit} bytes"
        return f"file too large (over the file-size limit{shown}, `ulimit -f`)"
    try:
        st = os.statvfs(written.parent)
    except OSError:
        return None
    return full if st.f_bavail * st.f_frsize < 1 << 20 else None


# The one rule for names that become paths or rows (devices, task ids, selection runs, locks;
# network names narrow it further): ASCII only, so no name looks like another (a Cyrillic "с"
# beside a Latin "c") and every one is a safe path component; no trailing dot, which Windows
# and SMB shares drop ("cpu-avx2." would be cpu-avx2's folder).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}(?<!\.)")
NAME_RULE = ("1 to 64 ASCII letters, digits, '.', '-' and '_', starting with a letter or digit "
             "(no '..', no trailing '.')")


def check_name(name: object, what: str) -> str:
    """``name`` if it follows the name rule, else a TclError naming the ``what`` (e.g. "device
    name"), the rule, and the first character it does not allow."""
    if isinstance(name, str) and _NAME.fullmatch(name) and ".." not in name:
        return name
    bad = next((c for c in name if not (c.isascii() and (c.isalnum() or c in "._-"))), None) \
        if isinstance(name, str) else None
    why = f"; {bad!r} (U+{ord(bad):04X}) is not allowed" if bad is not None else ""
    raise TclError(f"invalid {what} {name!r}: expected {NAME_RULE}{why}")


def data_root(text: str, what: str) -> Path:
    """The data root ``text`` given as ``what`` (--data, $TCL_DATA), absolute. An empty one is
    refused: Path("") is the working directory, where a command would then write."""
    if not text.strip():
        raise TclError(f"{what} is set but empty; name the data root directory (without "
                       f"{what}, the data root is ./data)")
    return resolved(Path(text), what)


def resolved(path: Path, what: str) -> Path:
    """``path`` (given as ``what``) made absolute, links followed; a path no file system takes
    is a TclError naming it: a NUL byte (the OS ends a path there), or links that loop."""
    if "\0" in str(path):
        raise TclError(f"{what} {str(path)!r}: a path holds no NUL byte")
    try:
        return path.resolve()
    except (RuntimeError, OSError) as e:   # Python < 3.13 raises RuntimeError for a loop
        raise TclError(f"{what} {path}: cannot follow its links ({e})") from None


def check_writable(root: Path) -> Path:
    """``root``, the data root of a command that writes, if this process may write there (or
    make it there): else a TclError naming it, before any work. A read-only one (a read-only
    mount, a shared copy without write permission) stays readable: query, status and device
    list only read it."""
    probe = next((p for p in (root, *root.parents) if p.exists()), None)
    if probe is None or os.access(probe, os.W_OK | os.X_OK):
        return root
    try:
        read_only = bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    why = "it is on a read-only file system" if read_only else "this user may not write in it"
    made = "" if probe == root else f" (it would be made in {probe})"
    raise TclError(f"data root {root} is not writable{made}: {why}; this command writes to it: "
                   "use a writable one (commands that only read, such as query, status and "
                   "device list, still work on this one)")


@dataclass(frozen=True)
class Paths:
    """The layout of one data root (``data/`` of the project by default)."""

    root: Path

    @classmethod
    def default(cls) -> "Paths":
        """$TCL_DATA, else ``data`` of the working directory; a TCL_DATA set but empty is a
        TclError (``data_root``)."""
        return cls(data_root(os.environ.get("TCL_DATA", "data"), "TCL_DATA"))

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
    def features_version_file(self) -> Path:
        """Which featurizer computed the cached features (``tcl.features.features_version``)."""
        return self.features_dir / "VERSION.json"

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
