"""No traceback reaches a user: the CLI over a table of bad inputs and faults. Each exits
non-zero with one line naming the problem, or succeeds with a stated no-op. Runs in-process
(an uncaught exception fails the test just as a traceback would)."""
import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from tcl.cli import main
from tcl.store.records import RecordStore
from test_store import rows

ROOT = Path(__file__).resolve().parent.parent
TINY = yaml.safe_load((ROOT / "tests" / "tiny_params.yaml").read_text())
ZEN3 = json.dumps({"kind": "llvm", "mcpu": "znver3", "num-cores": 2})


def params_file(tmp_path: Path, edit) -> str:
    raw = json.loads(json.dumps(TINY))
    raw["data"] = str(tmp_path / "data")
    edit(raw)
    f = tmp_path / "params.yaml"
    f.write_text(yaml.safe_dump(raw, sort_keys=False))   # continual.then's order is the order
    return str(f)


def setup_data_root(tmp_path):       # an empty data root: commands that only read need one
    (tmp_path / "data").mkdir()


def setup_file(tmp_path):            # a path that is a file, not a directory
    f = tmp_path / "afile"
    f.write_text("x")
    return str(f)


def setup_below_file(tmp_path):      # a path under a file
    return str(Path(setup_file(tmp_path)) / "x")


def setup_registered(tmp_path):      # zen3 registered once already
    main(["--data", str(tmp_path / "data"), "device", "add", "zen3", "--target", ZEN3,
          "--no-run"])
    return None


def setup_garbage_db(tmp_path):
    d = tmp_path / "db"
    d.mkdir()
    (d / "database_workload.json").write_text("not json\n")
    (d / "database_tuning_record.json").write_text("[0, garbage\n")
    return str(d)


def setup_corrupt_registry(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "devices.json").write_text("{not json")
    return None


def setup_corrupt_record(tmp_path):
    from tcl.config import Paths

    paths = Paths(tmp_path / "data")
    (f,) = RecordStore(paths).append(rows(n=2))
    RecordStore(paths).append(rows(task="t2", n=2))
    f.write_bytes(b"garbage")
    return None


def setup_latin1_params(tmp_path):   # a params file saved in Latin-1, not UTF-8
    f = tmp_path / "params.yaml"
    f.write_bytes("data: data  # café\n".encode("latin-1"))
    return str(f)


def setup_laughs(tmp_path):          # "billion laughs": 10 aliases of 10, nine levels deep
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 9)]
    f = tmp_path / "params.yaml"
    f.write_text("\n".join(lines) + "\n")
    return str(f)


def setup_self_alias(tmp_path):
    f = tmp_path / "params.yaml"
    f.write_text("data: &a [1, *a]\n")
    return str(f)


def setup_huge_params(tmp_path):
    from tcl.pipeline.params import MAX_FILE_BYTES

    f = tmp_path / "params.yaml"
    f.write_text("data: data\n#" + "x" * MAX_FILE_BYTES + "\n")
    return str(f)


def setup_latin1_db(tmp_path):       # a MetaSchedule database that is not UTF-8
    d = tmp_path / "db"
    d.mkdir()
    (d / "database_workload.json").write_bytes(b"\xff\xfe not utf-8\n")
    (d / "database_tuning_record.json").write_bytes(b"\xff\n")
    return str(d)


def setup_corrupt_zoo(name):
    def setup(tmp_path):
        f = tmp_path / "data" / "zoo" / name
        f.parent.mkdir(parents=True)
        f.write_bytes(b"garbage")
    return setup


def setup_damaged_zoo_page(tmp_path):   # tasks.parquet whose footer reads, a data page not
    from tcl.config import Paths
    from tcl.store.records import write_parquet_atomic
    from tcl.store.schemas import TASK_SCHEMA

    f = Paths(tmp_path / "data").tasks_file
    write_parquet_atomic(pl.DataFrame([{"task_id": f"t{i}", "task_name": f"n{i}" * 50,
                                        "op_class": "dense", "workload_json": "x" * 2000 + str(i),
                                        "flop": 1.0} for i in range(50)], schema=TASK_SCHEMA), f)
    raw = bytearray(f.read_bytes())
    for i in range(len(raw) // 10, len(raw) // 2):   # the pages; the footer lies at the end
        raw[i] ^= 0x5A
    f.write_bytes(bytes(raw))


def setup_corrupt_features(tmp_path):   # records and task of t1, its cached features garbage
    from tcl.config import Paths
    from tcl.store.records import write_parquet_atomic
    from tcl.store.schemas import TASK_SCHEMA

    paths = Paths(tmp_path / "data")
    RecordStore(paths).append(rows(n=2))
    write_parquet_atomic(pl.DataFrame([{"task_id": "t1", "task_name": "t1", "op_class": "dense",
                                        "workload_json": "{}", "flop": 0.0}],
                                      schema=TASK_SCHEMA), paths.tasks_file)
    f = paths.features_file("t1")
    f.parent.mkdir(parents=True)
    f.write_bytes(b"garbage")
    from tcl.features import features_version   # this featurizer's cache: it is read, not redone
    paths.features_version_file.write_text(json.dumps(features_version()))


def setup_not_python(tmp_path):     # a network's factory in a file that is not Python
    f = tmp_path / "net.txt"
    f.write_text("def build():\n    pass\n")
    return f"{f}:build"


def setup_symlink_loop(tmp_path):   # a data root that is a link to itself
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    return str(tmp_path / "loop")


def setup_negative_weights(tmp_path):
    f = tmp_path / "weights.csv"
    f.write_text("network,task_id,weight\nnet,t1,1\nnet,t2,-5\n")
    return str(f)


def setup_hanging_factory(tmp_path):   # a user network whose factory never returns
    f = tmp_path / "hang_net.py"
    f.write_text("import time\n\n\ndef build():\n    time.sleep(10**6)\n")
    return f"{f}:build"


P = "{params}"    # replaced by a params file made from the edit in the case
F = "{file}"      # replaced by what the case's setup returns
CASES = [
    # collect: ranges checked before any work
    (["collect", "--device", "cpu-avx2", "--programs-per-task", "-5"], "must be [1, 4096]"),
    (["collect", "--device", "cpu-avx2", "--programs-per-task", "100000"], "must be [1, 4096]"),
    (["collect", "--device", "cpu-avx2", "--batch-size", "0"], "--batch-size: must be"),
    (["collect", "--device", "cpu-avx2", "--batch-size", "-1"], "--batch-size: must be"),
    (["collect", "--device", "cpu-avx2", "--max-tasks", "-3"], "--max-tasks: must be [1, 100000]"),
    (["collect", "--device", "cpu-avx2", "--max-tasks", "abc"], "expected an integer"),
    (["collect", "--device", "cpu-avx2", "--seed", "-1"], "--seed: must be"),
    (["collect", "--device", "cpu-avx2", "--split", "bogus"], "invalid choice"),
    (["collect", "--device", "tpu-v9"], "unknown device 'tpu-v9'"),
    (["collect", "--device", "cpu-avx2", "--networks", "resnet19"], "resnet19"),
    (["collect", "--device", "../../etc"], "unknown device"),
    (["collect", "--device", "cpu-avx2", "--select", "rdu", "--budget", "0"],
     "--budget: expected a count"),
    (["collect", "--device", "cpu-avx2", "--select", "rdu", "--budget", "1.5"],
     "--budget: expected a count"),
    (["collect", "--device", "cpu-avx2", "--select", "greedy"], "invalid choice"),
    (["collect", "--device", "cpu-avx2", "--networks", "bert_tiny", "--small", "--deploy",
      "bert_tiny"], "use it with --select"),
    (["collect", "--device", "cpu-avx2", "--select", "rdu", "--rounds", "0"], "--rounds: must"),
    # every number has an upper bound, stated (issue 38)
    (["collect", "--device", "cpu-avx2", "--seed", str(2**32)], "--seed: must be [0, 4294967295]"),
    (["collect", "--device", "cpu-avx2", "--max-tasks", str(10**9)], "--max-tasks: must be [1, "),
    (["collect", "--device", "cpu-avx2", "--select", "rdu", "--budget", str(10**23)],
     "--budget: a count is at most"),
    (["tune", "--network", "resnet18", "--device", "cpu-avx2", "--population", "100000000"],
     "--population: must be [2, "),
    (["tune", "--network", "resnet18", "--device", "cpu-avx2", "--seed", str(10**23)],
     "--seed: must be [0, 4294967295]"),
    (["tune", "--network", "resnet18", "--device", "cpu-avx2", "--trials", str(10**9)],
     "--trials: must be [1, "),
    (["tune", "--network", "resnet18", "--device", "cpu-avx2", "--generations", str(10**6)],
     "--generations: must be [0, "),
    # query: read-only, and its own mistakes
    (["query", ""], "empty query", setup_data_root),
    (["query", "drop view records"], "queries are read-only", setup_data_root),
    (["query", "copy (select 1) to 'x.csv'"], "queries are read-only", setup_data_root),
    (["query", "attach 'x.duckdb'"], "queries are read-only", setup_data_root),
    (["query", "select * from nowhere"], "query failed", setup_data_root),
    (["query", "selec 1"], "query failed", setup_data_root),
    (["query", "select 1; select 2"], "one statement at a time", setup_data_root),
    (["query", "select * from read_text('/etc/passwd')"], "disabled by configuration",
     setup_data_root),
    # export / import
    (["export", F, "--device", "cpu-avx2"], "is a file", setup_file),
    (["export", "out", "--device", "nosuch"], "unknown device 'nosuch'"),
    (["import", "no/such/dir", "--device", "cpu-avx2"], "does not exist"),
    (["import", F, "--device", "cpu-avx2"], "could be read", setup_garbage_db),
    # the data root
    (["--data", F, "query", "select 1"], "is a file", setup_file),
    (["--data", F, "device", "list"], "is a file", setup_file),
    (["--data", F, "status"], "afile is a file, not a directory", setup_below_file),
    (["predict", "no/db", "--device", "cpu-avx2", "--out", F], "afile is a file, not a",
     setup_below_file),
    # devices
    (["device", "add", "../x", "--target", ZEN3], "invalid device name"),
    # a Cyrillic "ср" that looks like "cp" (issue 38): refused, saying what is allowed
    (["device", "add", "\u0441\u0440u-avx2", "--target", ZEN3, "--no-run"],
     "expected 1 to 64 ASCII letters, digits"),
    (["device", "add", "x", "--target", "not json"], "not JSON"),
    (["device", "add", "x", "--target", "{}"], "'kind' key"),
    (["device", "add", "x", "--target", '{"kind": "llvm", "mcpu": "pentium9"}'],
     "LLVM does not know CPU"),
    (["device", "add", "cpu-avx2", "--target", ZEN3], "built-in profile"),
    (["device", "add", "x", "--target", ZEN3, "--rpc-key", "k"], "both --rpc-key and --tracker"),
    (["device", "add", "x", "--target", ZEN3, "--rpc-key", "k", "--tracker", "nohost"],
     "invalid tracker"),
    (["device", "add", "x", "--target", ZEN3, "--rpc-key", "k", "--tracker", "h:99999"],
     "port in 1..65535"),
    (["device", "add", "x", "--target", ZEN3, "--repeat", "0"], "--repeat: must be"),
    (["device", "add", "x", "--target", ZEN3, "--timeout", "nan"], "--timeout: must lie"),
    (["device", "add", "zen3", "--target", ZEN3.replace("znver3", "znver2")],
     "already registered as", setup_registered),
    (["device", "add", "zen3", "--target", ZEN3, "--no-run"], "nothing changed",
     setup_registered, 0),
    (["device", "list"], "device registry", setup_corrupt_registry),
    # retire
    (["retire", "--device", "cpu-avx2", "--before", "yesterday", "--reason", "x"],
     "is not an ISO time"),
    (["retire", "--device", "cpu-avx2", "--before", "2026-11-29T21:00", "--reason", "x"],
     "time zone"),
    (["retire", "--device", "../x", "--before", "2026-11-29T21:00Z", "--reason", "x"],
     "unknown device '../x'"),
    # datacard
    (["datacard", "--fraction", "0"], "--fraction: must lie in (0.0, 1.0]"),
    (["datacard", "--fraction", "2"], "--fraction: must lie"),
    (["datacard", "--out", F], "is a file", setup_file),
    # params and stages
    (["params", "--params", P], "epochs must be an integer in [1",
     lambda raw: raw["train"]["hyper"]["mamba"].update(epochs=-3)),
    (["params", "--params", P], "batch_size must be an integer in [1",
     lambda raw: raw["train"]["hyper"]["mamba"].update(batch_size=0)),
    (["params", "--params", P], "max_depth must be an integer in [1",
     lambda raw: raw["train"]["hyper"]["xgb"].update(max_depth=-10)),
    (["params", "--params", P], "sample.programs_per_task: must be <= 4096",
     lambda raw: raw["sample"].update(programs_per_task=100000)),
    (["params", "--params", P], "measure.batch_size: must be >= 1",
     lambda raw: raw["measure"].update(batch_size=0)),
    (["params", "--params", P], "measure.pipelined: expected true or false",
     lambda raw: raw["measure"].update(pipelined="yes")),
    (["params", "--params", P], "unknown device 'tpu'", lambda raw: raw.update(devices=["tpu"])),
    (["params", "--params", "no/such/params.yaml"], "does not exist"),
    (["params", "--params", P], "is also in devices",
     lambda raw: raw["select"].update(devices=["cpu-avx2"])),
    (["params", "--params", P], "unknown sampler 'best'",
     lambda raw: raw["select"].update(sampler="best")),
    (["params", "--params", P], "select.budget: expected a count",
     lambda raw: raw["select"].update(budget=0)),
    (["params", "--params", P], "select.teacher: expected DEVICE/KIND",
     lambda raw: raw["select"].update(teacher="cpu-avx2/tlp")),
    (["params", "--params", P], "'cpu-sse42' comes before its teacher 'cpu-avx2-1c'",
     lambda raw: raw["continual"].update(then={"cpu-sse42": "cpu-avx2-1c",
                                               "cpu-avx2-1c": "cpu-avx2"})),
    (["params", "--params", P], "expected the device just before it, 'cpu-sse42'",
     lambda raw: raw["continual"].update(then={"cpu-sse42": "cpu-avx2",
                                               "cpu-avx2-1c": "cpu-avx2"})),
    (["params", "--params", P], "continual.first: expected a device name",
     lambda raw: raw["continual"].update(first="tpu")),
    (["params", "--params", P], "add_device.refresh_cron: expected a cron line",
     lambda raw: raw["add_device"].update(refresh_cron="99 3 * * *")),
    (["params", "--params", P], "add_device.refresh_cron: expected a cron line",
     lambda raw: raw["add_device"].update(refresh_cron="0 3 * * 5L")),   # cronsim's, not Prefect's
    (["status", "--params", "no/such/params.yaml"], "params file no/such/params.yaml does not"),
    (["stage", "select", "--params", P, "--device", "cpu-sse42"], "not in",
     lambda raw: None),
    (["train", "--params", P, "--device", "cpu-avx2", "--model", "mamba"],
     "epochs must be an integer", lambda raw: raw["train"]["hyper"]["mamba"].update(epochs=0)),
    (["stage", "measure", "--params", P], "needs --device", lambda raw: None),
    (["stage", "measure", "--params", P, "--device", "nosuch", "--dry-run"],
     "unknown device 'nosuch'; known devices", lambda raw: None),
    # the parser itself
    (["nosuchcommand"], "invalid choice"),
    ([], "required"),
    # files that are not what they should be: each named (issue 22)
    (["params", "--params", F], "is not UTF-8 text (byte 0xe9", setup_latin1_params),
    (["params", "--params", F], "aliases expand to more than", setup_laughs),
    (["params", "--params", F], "an alias refers to itself", setup_self_alias),
    (["params", "--params", F], "a params file is at most", setup_huge_params),
    (["import", F, "--device", "cpu-avx2"], "database_workload.json is not UTF-8 text",
     setup_latin1_db),
    (["collect", "--device", "cpu-avx2", "--networks", "bert_tiny", "--small", "--dry-run"],
     "zoo tasks file", setup_corrupt_zoo("tasks.parquet")),
    (["zoo", "list"], "zoo networks file", setup_corrupt_zoo("networks.parquet")),
    # a damaged page was named as the view: "reading the stream registered as 'tasks'" (issue 54)
    (["query", "select max(task_name) from tasks"], "tasks.parquet is not readable Parquet",
     setup_damaged_zoo_page),
    (["featurize"], "task=t1.parquet is not readable Parquet", setup_corrupt_features),
    (["predict", "no/db", "--device", "cpu-avx2", "--out", "."],
     "--out . is a directory; it names the file"),
    (["score", "--device", "cpu-avx2", "--out", F], "is a file; it names the directory",
     setup_file),
    (["tune", "--network", "resnet18", "--device", "cpu-avx2", "--out", F],
     "is a file; it names the directory", setup_file),
    (["score", "--device", "cpu-avx2", "--weights", F], "weight -5 is not a number >= 0",
     setup_negative_weights),
    (["zoo", "add", "hang", "--model", F, "--input", "1x3x8x8", "--timeout", "2"],
     "did not return its module within 2 s", setup_hanging_factory),
    # an unknown device, wherever one is named: the known ones are listed
    (["retire", "--device", "nosuch", "--before", "2026-11-29T21:00Z", "--reason", "x"],
     "unknown device 'nosuch'; known devices: cpu-avx2"),
    (["models", "list", "--device", "nosuch"], "unknown device 'nosuch'; known devices",
     setup_data_root),
    (["datacard", "--remeasure", "nosuch"], "unknown device 'nosuch'; known devices"),
    (["score", "--device", "nosuch"], "unknown device 'nosuch'; known devices"),
    (["predict", "no/db", "--device", "nosuch"], "unknown device 'nosuch'; known devices"),
    # --data: honoured, or refused where the params file names the data root
    (["--data", "elsewhere", "params", "--params", P], "takes its data root from the params",
     lambda raw: None),
    # a corrupt record file: named, skipped, the query still answers
    (["query", "select count(*) n from records"], "skipped unusable record file",
     setup_corrupt_record, 0),
    # internal errors that were (issue 54): each one line, exit 2
    (["zoo", "add", "x", "--model", F, "--input", "1x3x8x8"], "net.txt is not a .py file",
     setup_not_python),
    (["params", "--params", P], "a path holds no NUL byte",
     lambda raw: raw.update(data=raw["data"] + "\0x")),
    (["--data", F, "status"], "--data", setup_symlink_loop),
    (["--data", F, "query", "select 1"], "--data", setup_symlink_loop),
    (["device", "add", "x", "--target", "[" * 5000 + "]" * 5000, "--no-run"],
     "not JSON (nested too deeply"),
    # the commands no case above reached (test_every_command_has_a_case)
    (["models", "convert", "/nonexistent.model"], "model file /nonexistent.model does not exist"),
    (["serve", "--params", "/nonexistent.yaml"], "params file /nonexistent.yaml does not exist"),
    (["evaluate", "--params", "/nonexistent.yaml"], "params file /nonexistent.yaml does not exist"),
    (["distill", "--device", "cpu-avx2", "--params", "/nonexistent.yaml"],
     "params file /nonexistent.yaml does not exist"),
]


def run_case(capsys, argv):
    try:
        code = main(argv)
    except SystemExit as e:   # argparse
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("case", CASES, ids=lambda c: " ".join(c[0])[:60] or "no arguments")
def test_bad_input_gets_one_line_naming_the_problem(tmp_path, capsys, case):
    argv, expected, *rest = case
    setup = rest[0] if rest else None
    want_code = rest[1] if len(rest) > 1 else None
    argv = list(argv)
    if P in argv:
        argv[argv.index(P)] = params_file(tmp_path, setup)
    elif setup is not None:
        made = setup(tmp_path)
        if F in argv:
            argv[argv.index(F)] = made
        capsys.readouterr()
    if argv and argv[0] != "--data" and "--params" not in argv:
        argv = ["--data", str(tmp_path / "data")] + argv
    code, out, err = run_case(capsys, argv)
    assert "Traceback" not in out + err
    assert "internal error" not in err, err
    if want_code == 0:
        assert code == 0 and expected in out + err, (out, err)
        return
    assert code not in (0, None), (code, out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got: {err!r}"
    assert expected in lines[0], lines[0]


def _commands(parser, prefix=()):
    """Every command path of the CLI: ("collect",), ("models", "convert"), ..."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield prefix + (name,)
                yield from _commands(sub, prefix + (name,))


def test_every_command_has_a_case():
    """The table reaches every command tcl has (a new command without a bad-input case fails
    here), not merely some number of rows."""
    from tcl.cli import build_parser

    commands = list(_commands(build_parser()))
    leaves = [c for c in commands if not any(d[:len(c)] == c != d for d in commands)]

    def words(argv):   # the command words of a case: no options, no --data's value
        return tuple(w for i, w in enumerate(argv)
                     if not w.startswith("-") and not (i and argv[i - 1] == "--data"))

    cased = [words(argv) for argv, *_ in CASES]
    missing = [" ".join(c) for c in leaves if not any(w[:len(c)] == c for w in cased)]
    assert not missing, f"commands with no bad-input case: {missing}"


def test_an_unreachable_tracker_is_retried_and_registers_nothing(tmp_path, capsys):
    import socket

    from tcl.config import Paths
    from tcl.store.devices import DeviceRegistry

    with socket.socket() as s:              # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    params = params_file(tmp_path, lambda raw: raw["measure"].update(retries=2, retry_delay_s=0))
    code, out, err = run_case(capsys, [
        "--data", str(tmp_path / "data"), "device", "add", "board", "--target",
        json.dumps({"kind": "llvm", "mcpu": "haswell", "num-cores": 1}), "--rpc-key", "board",
        "--tracker", f"127.0.0.1:{port}", "--params", params])
    assert code == 2 and "Traceback" not in err
    assert err.count("trying again") == 2        # the policy: measure.retries
    last = err.strip().splitlines()[-1]
    assert f"cannot reach the tracker at 127.0.0.1:{port}" in last
    assert "after 3 attempts" in last and "'board' is not registered" in last
    assert "board" not in DeviceRegistry(Paths(tmp_path / "data")).all()


def test_a_params_file_named_for_the_trackers_retries_must_exist(tmp_path, capsys):
    """Issue 38: `device add --no-run --params MISSING.yaml --tracker HOST:PORT` took the
    default retries without a word; a file --params names must exist. Nothing is registered
    and no tracker is tried."""
    from tcl.config import Paths
    from tcl.store.devices import DeviceRegistry

    missing = tmp_path / "no" / "params.yaml"
    code, out, err = run_case(capsys, [
        "--data", str(tmp_path / "data"), "device", "add", "board", "--target",
        json.dumps({"kind": "llvm", "mcpu": "haswell", "num-cores": 1}), "--rpc-key", "board",
        "--tracker", "127.0.0.1:9", "--no-run", "--params", str(missing)])
    assert code == 2 and out == "", (out, err)
    assert err.strip().splitlines() == [
        f"tcl: error: params file {missing} does not exist (copy the project's params.yaml)"]
    assert "board" not in DeviceRegistry(Paths(tmp_path / "data")).all()


def test_a_params_file_named_with_no_run_must_exist(tmp_path, capsys):
    """Issue 54: `device add --params MISSING.yaml --no-run` (no tracker) registered the device
    with rc 0 and not a word of the file. A file --params names must exist whatever else is
    given; nothing is registered."""
    from tcl.config import Paths
    from tcl.store.devices import DeviceRegistry

    missing = tmp_path / "nonexistent.yaml"
    code, out, err = run_case(capsys, ["--data", str(tmp_path / "data"), "device", "add", "zen3",
                                       "--target", ZEN3, "--no-run", "--params", str(missing)])
    assert code == 2 and out == "", (out, err)
    assert err.strip().splitlines() == [
        f"tcl: error: params file {missing} does not exist (copy the project's params.yaml)"]
    assert "zen3" not in DeviceRegistry(Paths(tmp_path / "data")).all()


# ---- issue 38 ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ms_db(tmp_path_factory):
    """A JSONDatabase made by MetaSchedule itself: one workload, three programs of 1, 2, 3 ms."""
    from conftest import metaschedule_database

    return metaschedule_database(tmp_path_factory.mktemp("db"))


@pytest.mark.parametrize("run_secs", ["[-1, -2]", "[0.0]", "[null]", "[NaN]", "[Infinity]",
                                      "[0.001, -1]", "[true]", '"soon"', "{}",
                                      "[1e-300]", "[0.001, 5e-10]"])
def test_an_imported_line_whose_run_secs_are_no_run_times_is_skipped_and_named(
        tmp_path, capsys, ms_db, run_secs):
    """A null run time made TVM segfault (rc 139); negative and zero ones were stored as ok,
    and so was 1e-300 s, which then ranked fastest (issue 54): below MIN_RUN_SECS (1 ns) no
    kernel runs. The line is skipped, named in one warning line that counts them, and nothing
    of it stored."""
    from tcl.config import Paths
    from tcl.measure.msjson import RECORD_FILE, WORKLOAD_FILE

    db = tmp_path / "db"
    db.mkdir()
    (db / WORKLOAD_FILE).write_text((ms_db / WORKLOAD_FILE).read_text())
    lines = (ms_db / RECORD_FILE).read_text().splitlines()
    first = json.loads(lines[0])
    bad = json.dumps([first[0], [first[1][0], "RUN_SECS", *first[1][2:]]])
    (db / RECORD_FILE).write_text("\n".join([lines[1], bad.replace('"RUN_SECS"', run_secs),
                                             lines[2]]) + "\n")
    code, out, err = run_case(capsys, ["--data", str(tmp_path / "data"), "import", str(db),
                                       "--device", "cpu-avx2"])
    assert code == 0 and "Traceback" not in err, err
    warnings = [line for line in err.splitlines() if line.strip()]
    assert len(warnings) == 1, warnings
    assert "1 line whose run_secs" in warnings[0] and f"{RECORD_FILE}:2" in warnings[0]
    assert ">= 1e-09" in warnings[0] and "1 skipped" in out
    frame = RecordStore(Paths(tmp_path / "data")).read()
    assert len(frame) == 2 and frame["status"].to_list() == ["ok", "ok"]
    assert sorted(frame["latencies"].to_list()) == [[pytest.approx(2e-3)], [pytest.approx(3e-3)]]


@pytest.mark.parametrize("where, text", [
    ("top", "devices: [cpu-avx2]\n"),                         # a top-level key again
    ("nested", "sample:\n  seed: 1\n  seed: 2\n"),            # twice within one section
])
def test_a_params_key_given_twice_is_refused_naming_both_lines(tmp_path, capsys, where, text):
    lines = (ROOT / "tests" / "tiny_params.yaml").read_text().splitlines()
    if where == "top":
        lines.append(text.strip())
        key, first, second = "devices", 3, len(lines)
    else:   # the sample section's seed, given again right below it
        at = lines.index("  seed: 0", lines.index("sample:"))
        lines.insert(at + 1, "  seed: 1")
        key, first, second = "seed", at + 1, at + 2
    f = tmp_path / "params.yaml"
    f.write_text("\n".join(lines).replace("data: data", f"data: {tmp_path / 'data'}") + "\n")
    code, _, err = run_case(capsys, ["params", "--params", str(f)])
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"key {key!r} is given twice (lines {first} and {second})" in err, err


@pytest.mark.parametrize("argv, message", [
    (["query", "select 1"], "TCL_DATA is set but empty"),
    (["device", "list"], "TCL_DATA is set but empty"),
    (["--data", "", "query", "select 1"], "--data is set but empty"),
])
def test_an_empty_data_root_is_refused_and_nothing_is_written_here(tmp_path, capsys,
                                                                   monkeypatch, argv, message):
    """An empty TCL_DATA (or --data "") named the working directory: `tcl query` wrote its
    catalog there."""
    monkeypatch.setenv("TCL_DATA", "")
    monkeypatch.chdir(tmp_path)
    code, _, err = run_case(capsys, argv)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def read_only_root(tmp_path):
    """A data root with records of cpu-avx2 and a registered device, made read-only: by its
    directories' modes for a user, by a read-only bind mount for root (whom modes do not stop;
    skipped where root may not mount)."""
    import os
    import subprocess

    from tcl.config import Paths

    paths = Paths(tmp_path / "data")
    RecordStore(paths).append(rows(n=3))
    assert main(["--data", str(paths.root), "device", "add", "zen3", "--target", ZEN3,
                 "--no-run"]) == 0
    if os.geteuid() != 0:
        dirs = [paths.root, *(d for d in paths.root.rglob("*") if d.is_dir())]
        for d in dirs:
            d.chmod(0o555)
        yield paths
        for d in dirs:
            d.chmod(0o755)
        return
    root = str(paths.root)
    for cmd in (["mount", "--bind", root, root], ["mount", "-o", "remount,bind,ro", root]):
        if subprocess.run(cmd, capture_output=True).returncode != 0:
            subprocess.run(["umount", root], capture_output=True)
            pytest.skip("running as root, and a read-only bind mount is not allowed here")
    try:
        yield paths
    finally:
        subprocess.run(["umount", root], check=True)


WRITING = [
    ["device", "add", "zen2", "--target", ZEN3.replace("znver3", "znver2"), "--no-run"],
    ["collect", "--device", "cpu-avx2", "--networks", "bert_tiny", "--small"],
    ["import", "no/such/db", "--device", "cpu-avx2"],
    ["featurize"],
    ["retire", "--device", "cpu-avx2", "--before", "2030-01-01T00:00Z", "--reason", "x"],
    ["train", "--params", P, "--device", "cpu-avx2", "--model", "xgb"],
]


@pytest.mark.parametrize("argv", WRITING, ids=lambda a: " ".join(a[:2]))
def test_a_read_only_data_root_is_named_by_commands_that_write(read_only_root, tmp_path,
                                                               capsys, argv):
    """Issue 38: each writing command failed on whichever file it made first ("...lock:
    Read-only file system", or another error before it); now one line names the data root,
    before any work."""
    from test_store_safety import snapshot

    root = read_only_root.root
    argv = [params_file(tmp_path, lambda raw: None) if a == P else a for a in argv]
    if "--params" not in argv:
        argv = ["--data", str(root), *argv]
    before = snapshot(root)
    code, out, err = run_case(capsys, argv)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, (out, err)
    assert lines[0].startswith(f"tcl: error: data root {root} is not writable: "), lines[0]
    assert snapshot(root) == before


def test_a_read_only_data_root_still_answers_commands_that_read(read_only_root, capsys):
    root = str(read_only_root.root)
    code, out, err = run_case(capsys, ["--data", root, "query", "--format", "csv",
                                       "select device, count(*) n from records group by 1"])
    assert code == 0 and out.splitlines() == ["device,n", "cpu-avx2,3"], err
    code, out, err = run_case(capsys, ["--data", root, "status", "--format", "json"])
    assert code == 0 and {json.loads(line)["device"] for line in out.splitlines()} == \
        {"cpu-avx2", "zen3"}, err
    code, out, err = run_case(capsys, ["--data", root, "device", "list"])
    assert code == 0 and "zen3" in out, err


def _numeric_options():
    """(command, option, its type) of every option of the CLI that takes a number."""
    import argparse

    from tcl.cli import build_parser

    found = []

    def walk(parser, prefix):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, prefix + [name])
            elif action.type is not None and action.option_strings:
                found.append((" ".join(prefix), action.option_strings[-1], action.type))
    walk(build_parser(), [])
    return found


@pytest.mark.parametrize("command, option, kind", _numeric_options(),
                         ids=lambda x: x if isinstance(x, str) else "")
def test_every_number_a_user_can_type_has_a_stated_upper_bound(command, option, kind):
    """`tune --population 100000000` ran for minutes and `--seed 10**23` overflowed: every
    number is checked by the parser against a range that has an upper end."""
    import argparse

    from tcl.budget import MAX_COUNT
    from tcl.cli.common import budget_arg

    if kind is budget_arg:
        high = MAX_COUNT
    else:
        high = getattr(kind, "high", None)
        assert high is not None, f"tcl {command} {option}: no upper bound"
    past = str(high + 1 if isinstance(high, int) else high * 2)
    with pytest.raises(argparse.ArgumentTypeError, match=f"{high:g}" if isinstance(high, float)
                       else str(high)):
        kind(past)
    kind(str(high))   # the bound itself is allowed


@pytest.mark.parametrize("section", ["sample", "train", "select", "continual"])
def test_every_seed_of_the_params_file_has_the_commands_bound(tmp_path, section):
    """Issue 38: params.yaml's seeds had a bound of their own (2**31 - 1), apart from --seed's;
    both now take `tcl.config.MAX_SEED`, stated when refused. train.seed counts the
    train.seeds that follow it (seed, seed + 1, ...); the bound itself is taken."""
    from tcl.config import MAX_SEED, TclError
    from tcl.pipeline.params import load_params

    high = MAX_SEED - (TINY["train"]["seeds"] - 1 if section == "train" else 0)
    with pytest.raises(TclError, match=rf"{section}\.seed: must be <= {high}\b"):
        load_params(params_file(tmp_path, lambda raw: raw[section].update(seed=high + 1)))
    params = load_params(params_file(tmp_path, lambda raw: raw[section].update(seed=high)))
    assert getattr(params, section).seed == high


@pytest.mark.parametrize("cron", [
    "0 3 * * *", "99 3 * * *", "0 3 * * 8", "*/0 * * * *", "0 3 31 2 *", "0 3 * * 5L",
    "0 3 LW * *", "5-1 * * * *", "0 3 ? * *", "H 3 * * *", "R 3 * * *", "0 3 * * MON-FRI",
    "0 3 * * 1#2", "0 3 L * *", "0 24 * * *", "1,,2 * * * *"])
def test_the_cron_rule_is_the_one_tcl_serve_applies(cron):
    """params' check of add_device.refresh_cron takes exactly what Prefect's CronSchedule (the
    schedule `tcl serve` builds) takes."""
    from prefect.client.schemas.schedules import CronSchedule

    from tcl.config import TclError
    from tcl.pipeline.params_rules import Cron

    try:
        CronSchedule(cron=cron)
        prefect_takes = True
    except ValueError:
        prefect_takes = False
    try:
        Cron().check(cron, "add_device.refresh_cron", {})
        tcl_takes = True
    except TclError:
        tcl_takes = False
    assert tcl_takes == prefect_takes


# ---- issue 54: non-finite numbers in params.yaml ----------------------------------------------

@pytest.mark.parametrize("key, edit", [
    ("train.hyper.xgb.eta", lambda raw: raw["train"]["hyper"]["xgb"].update(eta=float("nan"))),
    ("train.hyper.mamba.lr", lambda raw: raw["train"]["hyper"]["mamba"].update(lr=float("nan"))),
    ("train.hyper.mamba.lr", lambda raw: raw["train"]["hyper"]["mamba"].update(lr=float("inf"))),
    ("train.hyper.xgb.eta", lambda raw: raw["train"]["hyper"]["xgb"].update(eta=-float("inf"))),
    ("train.hyper.mamba.dims[1]",
     lambda raw: raw["train"]["hyper"]["mamba"].update(dims=[1.0, float("nan")])),
    ("select.weights.u", lambda raw: raw["select"]["weights"].update(u=float("inf"))),
])
def test_a_non_finite_number_in_params_is_refused_naming_its_key(tmp_path, capsys, key, edit):
    """Issue 54: `train.hyper.xgb.eta: .nan` passed `tcl params`; train then exited 0 with
    every prediction NaN (and Mamba's `lr: .nan` ended in an internal error)."""
    code, out, err = run_case(capsys, ["params", "--params", params_file(tmp_path, edit)])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, (out, err)
    assert f"params.yaml: {key}: expected a finite number, got " in lines[0], lines[0]


# ---- issue 54: a data root that does not exist, given to a command that only reads --------------

ONLY_READ = [["status"], ["query", "select 1"], ["device", "list"], ["zoo", "list"]]


@pytest.mark.parametrize("how, argv", [("--data", a) for a in ONLY_READ + [["models", "list"]]]
                         + [("TCL_DATA", a) for a in ONLY_READ],   # models list: no TCL_DATA
                         ids=lambda x: x if isinstance(x, str) else " ".join(x))
def test_a_missing_data_root_is_refused_by_commands_that_only_read(tmp_path, capsys,
                                                                   monkeypatch, how, argv):
    """Issue 54: `TCL_DATA=/nonexistent tcl status` printed an empty table with rc 0, and `tcl
    query` on a mistyped root made it and wrote a catalog there. One line naming the root, exit
    2, nothing made."""
    missing = tmp_path / "no" / "such" / "data"
    monkeypatch.chdir(tmp_path)
    if how == "--data":
        argv = ["--data", str(missing), *argv]
    else:
        monkeypatch.setenv("TCL_DATA", str(missing))
    code, out, err = run_case(capsys, argv)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and out == "", (out, err)
    assert lines[0].startswith(f"tcl: error: data root {missing} does not exist"), lines[0]
    assert how in lines[0], lines[0]
    assert list(tmp_path.iterdir()) == []


# ---- issue 54: query answers of every DuckDB type, in every format ---------------------------

@pytest.mark.parametrize("sql, column, text", [
    ("select interval 1 day as v", "v", "1 day"),
    ("select union_value(a := 1) as v", "v", "1"),
    ("select [union_value(a := 1), union_value(b := 'x')] as v", "v", "[1, x]"),
    ("select 'ab'::blob as v", "v", "ab"),
    ("select '\\xFF'::blob as v", "v", "\\xFF"),
    ("select '101'::bit as v", "v", "101"),
    ("select '12:00:00+05'::timetz as v", "v", "12:00:00+05"),        # the offset kept
    ("select {'t': interval 2 hours} as v", "v", "{'t': '02:00:00'}"),  # nested: all of it
    ("select '123456789012345678901234567890'::varint as v", "v",
     "123456789012345678901234567890"),
])
@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_a_query_answers_every_duckdb_type_in_every_format(tmp_path, capsys, sql, column, text,
                                                           fmt):
    """Issue 54: an INTERVAL, a UNION, a BIGNUM (any format) and a BLOB or BIT (--format csv,
    json) ended in internal errors or Rust panics, and a TIMETZ lost its offset: polars holds
    none of them whole. They come back as DuckDB's own text of the value."""
    (tmp_path / "data").mkdir()
    code, out, err = run_case(capsys, ["--data", str(tmp_path / "data"), "query", "--format",
                                       fmt, sql])
    assert code == 0 and err == "", (out, err)
    if fmt == "csv":
        assert out.splitlines() == [column, text if "," not in text else f'"{text}"'], out
    elif fmt == "json":
        assert [json.loads(line) for line in out.splitlines()] == [{column: text}], out
    else:
        assert text in out, out


@pytest.mark.parametrize("sql", ["select 'infinity'::date as v",
                                 "select '290309-12-22 (BC) 00:00:00'::timestamp as v",
                                 "select ['-infinity'::timestamptz] as v"])
@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_a_date_no_format_can_show_is_refused_naming_its_column(tmp_path, capsys, sql, fmt):
    """A date or time beyond what polars shows (an infinite one, or more than 262,143 years
    away) made polars panic; the column is named, with the cast that shows it."""
    (tmp_path / "data").mkdir()
    code, out, err = run_case(capsys, ["--data", str(tmp_path / "data"), "query", "--format",
                                       fmt, sql])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and out == "" and len(lines) == 1, (out, err)
    assert "column 'v' holds a date or time" in lines[0] and "v::VARCHAR" in lines[0], lines[0]
