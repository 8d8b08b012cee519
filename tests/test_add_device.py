"""The add-device run on real measurements (tiny profile): a registered device is selected,
measured, distilled from the latest model, evaluated and registered; again, nothing new; a
device whose every measurement fails gets no model; `tcl status` says what is pending."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import stop_group
from tcl.pipeline.add_device import STEPS
from tcl.config import TclError

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
BOARD = json.dumps({"kind": "llvm", "mcpu": "haswell", "num-cores": 1})


def _tcl(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    try:
        out = subprocess.run([sys.executable, "-m", "tcl.cli", *args], cwd=root, text=True,
                             capture_output=True, timeout=600)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{args} timed out; output so far:\n{e.stdout}\n{e.stderr}")
    if check:
        assert out.returncode == 0, f"{args}: {out.stdout[-2000:]}\n{out.stderr[-2000:]}"
    return out


@pytest.fixture(scope="module")
def first_model(tmp_path_factory):
    """The tiny profile measured on cpu-avx2, and the sequence's first model."""
    from tcl.pipeline import stages
    from tcl.pipeline.continual import distill_device
    from tcl.pipeline.params import load_params

    root = tmp_path_factory.mktemp("add-device")
    raw = yaml.safe_load((ROOT / "tests" / "tiny_params.yaml").read_text())
    raw["continual"].update(first="cpu-avx2", then={}, backbone="tenset-mlp")
    raw["train"]["models"] = ["tenset-mlp"]
    raw["train"]["hyper"] = {"tenset-mlp": {"hidden": 16, "epochs": 3, "batch_size": 64}}
    raw["select"].update(budget=0.5, teacher="cpu-avx2/tenset-mlp")
    (root / "params.yaml").write_text(yaml.safe_dump(raw))
    params = load_params(root / "params.yaml")
    stages.run_zoo(params)
    stages.run_sample(params, progress=False)
    stages.run_measure(params, "cpu-avx2", progress=False)
    stages.run_featurize(params, progress=False)
    distill_device(params, "cpu-avx2", say=lambda _: None)
    return params


def test_add_device_runs_the_continual_step_once(first_model):
    from tcl.registry import ModelRegistry
    from tcl.pipeline.status import device_status
    from tcl.store.catalog import query

    params = first_model
    root = params.source.parent
    before = query(params.paths, "select count(*) n from records where device = 'cpu-avx2'")
    out = _tcl(root, "device", "add", "board", "--target", BOARD)   # registers, then runs
    text = out.stdout + out.stderr   # the flow's prints go through Prefect's logger
    assert "added device board" in text and "Device board added" in text
    # the table of step times ends the command's output
    table = out.stdout[out.stdout.index("time from the command to the registered model"):]
    for step in STEPS:
        assert f"| {step} | " in table, table
    assert "**command to registered model**" in table
    reg = ModelRegistry(params.paths)
    model = reg.latest("board", "tenset-mlp")
    assert model is not None and model.devices == ["cpu-avx2", "board"]
    assert model.parent == reg.latest("cpu-avx2").id
    assert "board" in model.metrics["devices"] and "cpu-avx2" in model.metrics["forgetting"]
    picked = query(params.paths, "select count(*) n from selections s join records r "
                                 "using (device, program_id) where device = 'board'")
    assert picked["n"][0] == model.n_records > 0
    # earlier devices' data untouched; the new device's plot and the artifact's table exist
    after = query(params.paths, "select count(*) n from records where device = 'cpu-avx2'")
    assert before["n"][0] == after["n"][0]
    assert (params.paths.reports_dir / "add-device" / "board.png").stat().st_size > 0
    status = {r["device"]: r for r in device_status(params.paths).iter_rows(named=True)}
    assert status["board"]["pending"] == "up to date" and status["board"]["model"] == model.id
    assert status["cpu-avx2"]["model"] is not None
    # the same device again: nothing selected anew, nothing measured, nothing trained
    again = _tcl(root, "device", "add", "board", "--target", BOARD)
    text = again.stdout + again.stderr
    assert "nothing changed" in text and "nothing new" in text
    assert len(ModelRegistry(params.paths).entries("board")) == 1
    listed = _tcl(root, "status", "--format", "csv").stdout
    assert "board" in listed and "up to date" in listed


def test_a_device_whose_every_measurement_fails_gets_no_model(first_model):
    from tcl.pipeline.add_device import add_device_run
    from tcl.registry import ModelRegistry
    from tcl.pipeline.status import device_status

    params = first_model
    root = params.source.parent
    # every run needs a minute of repeats but may take a tenth of a second: all time out
    _tcl(root, "device", "add", "slow", "--target", BOARD, "--min-repeat-ms", "60000",
         "--timeout", "0.1", "--no-run")
    with pytest.raises(TclError, match="no measurement of slow succeeded.*marked failed"):
        add_device_run(params, "slow", say=lambda _: None)
    assert ModelRegistry(params.paths).latest("slow") is None
    status = {r["device"]: r for r in device_status(params.paths).iter_rows(named=True)}
    assert status["slow"]["pending"].startswith("failed: no measurement of slow succeeded")
    bad = _tcl(root, "device", "add", "slow", "--target", BOARD, "--min-repeat-ms", "60000",
               "--timeout", "0.1", check=False)
    assert bad.returncode == 2 and "marked failed" in bad.stderr


def test_an_invalid_target_registers_and_runs_nothing(first_model):
    from tcl.store.devices import DeviceRegistry

    root = first_model.source.parent
    bad = _tcl(root, "device", "add", "broken", "--target", '{"kind": "llvm", "mcpu": "x"}',
               check=False)
    assert bad.returncode == 2 and "broken" not in DeviceRegistry(first_model.paths).all()


def _tracked(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` but caches, locks and Prefect's state: (size, mtime_ns)."""
    skip = {".cache", ".locks", ".prefect", "__pycache__"}
    return {str(f.relative_to(root)): (f.stat().st_size, f.stat().st_mtime_ns)
            for f in root.rglob("*") if f.is_file() and not skip & set(f.relative_to(root).parts)}


def test_a_dry_run_states_the_plan_and_writes_nothing_tracked(first_model):
    """`tcl device add --dry-run`: pool, budget, evaluation set and an estimate in seconds with
    its source: here no device has enough records for a rate, so a probe measures for real
    (nothing stored); no device is registered and no tracked file changes."""
    from tcl.store.devices import DeviceRegistry

    root = first_model.source.parent
    before = _tracked(root)
    out = _tcl(root, "device", "add", "plan", "--target", BOARD, "--dry-run")
    text = out.stdout
    for line in ("pool: ", "budget: ", "evaluation set: ", "estimate: "):
        assert line in text, text
    assert re.search(r"estimate: \d+ s of measurement .* records/s, a 20 s probe: \d+ "
                     r"programs measured on plan, not stored", text), text
    assert "plan" not in DeviceRegistry(first_model.paths).all()
    assert _tracked(root) == before


def test_a_dry_run_takes_its_rate_from_the_closest_device(first_model, monkeypatch):
    """With enough records (the minimum lowered for the tiny profile), the estimate comes from
    the closest registered device's measured rate, named with why it is close."""
    from tcl.pipeline.add_device import plan_add_device
    from tcl.store.devices import Device
    from tcl.measure import collect

    monkeypatch.setattr(collect, "MIN_RECORDS_FOR_RATE", 4)
    before = _tracked(first_model.source.parent)
    plan = plan_add_device(first_model, Device("near", json.loads(BOARD)),
                           say=lambda s: pytest.fail(f"probed: {s}"))
    # board (the same target) when the first test registered it, else cpu-avx2 (2 cores)
    assert re.match(r"measured rate of (board|cpu-avx2), the closest device with records "
                    r"\(same host, ", plan.source), plan.source
    assert plan.budget > 0 and plan.eval_programs > 0 and plan.measure_secs > 0
    assert "estimate: " in plan.describe()
    assert _tracked(first_model.source.parent) == before


def test_a_collection_reports_progress_while_it_measures(first_model):
    """A progress line (measured of the total, rate, ETA) every ``every_s`` seconds."""
    from tcl.store.devices import DeviceRegistry
    from tcl.measure.collect import collect
    from tcl.pipeline.inputs import selected_tasks

    params = first_model
    _tcl(params.source.parent, "device", "add", "watched", "--target", BOARD, "--no-run")
    lines: list[str] = []
    stats = collect(params.paths, DeviceRegistry(params.paths).get("watched"),
                    selected_tasks(params), 4, batch_size=4, progress=False,
                    report=lines.append, what="measure watched", every_s=0.2)
    assert stats.measured == 8 and lines, lines
    # at most one re-estimate, after the first batch, when its rate is 25% off the plan's
    replans = [line for line in lines if "the first batch ran at" in line]
    assert len(replans) <= 1 and all(line.startswith("measure watched: ") for line in replans)
    assert all(re.match(r"measure watched: \d+ of 8 programs measured, [\d.]+ records/s, "
                        r"ETA (\d+ s|after the first results) \(\d+ s so far"
                        r"(; a batch is (building|running))?\)$", line)
               for line in lines if line not in replans), lines


def test_the_add_device_flow_runs_each_step_as_a_prefect_task(first_model):
    """A real flow run (in process, Prefect's ephemeral API): its task runs are the steps, each
    completed; the result carries every step's seconds."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    from flows.add_device import add_device

    params = first_model
    _tcl(params.source.parent, "device", "add", "stepwise", "--target", BOARD, "--no-run")
    state = add_device(device="stepwise", params_file=str(params.source), return_state=True)
    assert state.is_completed(), state
    out = state.result()
    assert set(out["secs"]) == set(STEPS) and out["total_secs"] >= sum(out["secs"].values())
    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(
            id=FlowRunFilterId(any_=[state.state_details.flow_run_id])))
    names = sorted(r.name.rsplit("-", 1)[0] for r in runs)
    assert names == sorted(["select", "measure", "evaluation set", "featurize", "distill",
                            "register"]), names
    assert all(r.state.is_completed() for r in runs)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, timeout: float, what: str, procs=()) -> None:
    import time

    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return
        for p in procs:
            if p.poll() is not None:
                raise AssertionError(f"{what}: {p.args} exited with {p.returncode}")
        time.sleep(2)
    raise AssertionError(f"{what}: not within {timeout:.0f} s")


def _prefect_server(env: dict, port: int, procs: list) -> subprocess.Popen:
    """A real `prefect server start` on loopback (its own session), once it answers."""
    import urllib.request

    server = subprocess.Popen([str(Path(sys.executable).parent / "prefect"), "server", "start",
                               "--host", "127.0.0.1", "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    procs.append(server)

    def healthy() -> bool:
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health",
                                          timeout=2).status == 200
        except OSError:
            return False
    _wait(healthy, 180, "the Prefect server", procs)
    return server


def _flow_runs(api: str, flow: str, state: str) -> list[dict]:
    """The server's REST API: runs of ``flow`` in ``state`` (e.g. COMPLETED)."""
    import urllib.request

    body = json.dumps({"flows": {"name": {"any_": [flow]}},
                       "flow_runs": {"state": {"type": {"any_": [state]}}}})
    req = urllib.request.Request(f"{api}/flow_runs/filter", data=body.encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def test_the_event_triggers_the_served_add_device_deployment(first_model, tmp_path):
    """A real Prefect server on loopback; `tcl serve` serves the deployments; `tcl device add`
    emits tcl.device.added and the served deployment runs the add-device flow. An event naming
    another data root's params file is refused: a Failed run that says why, nothing read there."""
    import os
    import signal

    from tcl.store.devices import DeviceRegistry
    from tcl.registry import ModelRegistry

    params = first_model
    root = params.source.parent
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_API_URL=f"http://127.0.0.1:{port}/api", TVM_LOG_LEVEL="WARNING")
    bin_dir = Path(sys.executable).parent
    procs = []
    try:
        _prefect_server(env, port, procs)
        serve = subprocess.Popen([sys.executable, "-m", "tcl.cli", "serve"], cwd=root, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
        procs.append(serve)

        def served() -> bool:   # both deployments registered with the server
            out = subprocess.run([str(bin_dir / "prefect"), "deployment", "ls"], env=env,
                                 text=True, capture_output=True)
            return "add-device" in out.stdout and "refresh" in out.stdout
        _wait(served, 180, "tcl serve's deployments", procs)
        other = tmp_path / "other" / "params.yaml"    # another data root (other/data)
        other.parent.mkdir()
        other.write_text(params.source.read_text())
        # a run the served deployment would refuse: refused here, nothing registered or emitted
        mismatch = subprocess.run([sys.executable, "-m", "tcl.cli", "device", "add", "board3",
                                   "--target", BOARD, "--params", str(other)], cwd=root, env=env,
                                  text=True, capture_output=True, timeout=120)
        assert mismatch.returncode == 2 and "emitted" not in mismatch.stdout, mismatch
        assert f"is bound to {params.source.resolve()}, not {other}: it would refuse this run" \
            in mismatch.stderr, mismatch.stderr
        assert "board3" not in DeviceRegistry(params.paths).all()
        assert not (other.parent / "data").exists()
        add = subprocess.run([sys.executable, "-m", "tcl.cli", "device", "add", "board2",
                              "--target", BOARD], cwd=root, env=env, text=True,
                             capture_output=True, timeout=120)
        assert add.returncode == 0, add.stderr
        assert "emitted 'board2' as tcl.device.added" in add.stdout
        _wait(lambda: ModelRegistry(params.paths).latest("board2") is not None, 600,
              "the add-device run triggered by the event", procs)
        assert ModelRegistry(params.paths).latest("board2").devices[-1] == "board2"
        emit = ("import sys; from tcl.pipeline.events import emit_device_added; "
                "emit_device_added(sys.argv[1], sys.argv[2])")
        subprocess.run([sys.executable, "-c", emit, "board2", str(other)], cwd=root, env=env,
                       check=True, timeout=120)
        api = env["PREFECT_API_URL"]
        _wait(lambda: _flow_runs(api, "add-device", "FAILED"), 300, "the refused run", procs)
        [refused] = _flow_runs(api, "add-device", "FAILED")
        assert refused["state"]["message"].startswith(
            f"refused: the event's params file '{other}' is not {params.source.resolve()}")
        assert refused["parameters"]["params_file"] == str(params.source.resolve())
        assert not (other.parent / "data").exists()
        assert len(ModelRegistry(params.paths).entries("board2")) == 1
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def test_two_add_device_runs_of_one_device_measure_nothing_twice(first_model):
    from tcl.registry import ModelRegistry
    from tcl.store.catalog import query

    params = first_model
    root = params.source.parent
    _tcl(root, "device", "add", "twin", "--target", BOARD, "--no-run")
    code = ("import sys; from tcl.pipeline.params import load_params; "
            "from tcl.pipeline.add_device import add_device_run; "
            "add_device_run(load_params(sys.argv[1]), 'twin')")
    runs = [subprocess.Popen([sys.executable, "-c", code, str(params.source)], cwd=root,
                             text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            for _ in range(2)]
    outs = [p.communicate(timeout=900)[0] for p in runs]
    assert [p.returncode for p in runs] == [0, 0], outs
    counts = query(params.paths, "select count(*) n, count(distinct program_id) d from records "
                                 "where device = 'twin'")
    assert counts["n"][0] == counts["d"][0] > 0          # no program measured twice
    picked = query(params.paths, "select count(distinct run) runs, count(*) n from selections "
                                 "where device = 'twin'")
    assert picked["runs"][0] == 1                        # one selection, read by both
    assert len(ModelRegistry(params.paths).entries("twin")) == 1


def test_refresh_redistills_only_what_changed(first_model, capsys):
    from tcl.pipeline.refresh import refresh_all
    from tcl.registry import ModelRegistry

    params = first_model
    before = len(ModelRegistry(params.paths).entries())
    out = refresh_all(params, say=print)
    assert out and not any(v["new"] for v in out.values())
    assert "nothing new" in capsys.readouterr().out
    assert len(ModelRegistry(params.paths).entries()) == before


def test_a_prefect_server_that_goes_away_mid_run_loses_nothing(first_model, tmp_path):
    """The add-device flow runs against a real Prefect server on loopback, which is killed once
    the run has stored its first records. The run stops with an error that names the API
    (Prefect's client retries twice by tcl's default); started again on the embedded default
    (no server), it resumes from the store: the records are kept, none is measured twice, and
    the device gets its model."""
    import os
    import signal

    from tcl.registry import ModelRegistry
    from tcl.store.catalog import query

    params = first_model
    root = params.source.parent
    _tcl(root, "device", "add", "flaky", "--target", BOARD, "--no-run")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_API_URL=f"http://127.0.0.1:{port}/api", TVM_LOG_LEVEL="WARNING")
    procs: list = []

    def stored() -> int:
        return int(query(params.paths, "select count(*) n from records "
                                       "where device = 'flaky'")["n"][0])
    code = ("import sys; from flows._common import run_flow; "
            "from flows.add_device import add_device; "
            "run_flow(add_device, device='flaky', params_file=sys.argv[1])")
    run = None
    try:
        server = _prefect_server(env, port, procs)
        run = subprocess.Popen([sys.executable, "-c", code, str(params.source)], cwd=root,
                               env=env, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True)
        _wait(lambda: stored() > 0, 600, "the first records of the run", [run])
        os.killpg(server.pid, signal.SIGKILL)          # the server goes away mid-run
        server.wait(timeout=30)
        first_out = run.communicate(timeout=900)[0]
    finally:
        for p in procs + [run]:
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=30)
    kept = stored()
    assert kept > 0
    assert f"the Prefect API at http://127.0.0.1:{port}/api went away mid-run" in first_out, \
        first_out[-3000:]
    again = _tcl(root, "device", "add", "flaky", "--target", BOARD)   # no server: runs here
    assert "already registered" in again.stdout, (first_out[-3000:], again.stderr[-3000:])
    counts = query(params.paths, "select count(*) n, count(distinct program_id) d from records "
                                 "where device = 'flaky'")
    assert counts["n"][0] == counts["d"][0] >= kept        # kept, and nothing measured twice
    model = ModelRegistry(params.paths).latest("flaky")
    assert model is not None and model.devices[-1] == "flaky"
    assert len(ModelRegistry(params.paths).entries("flaky")) == 1


def test_serve_without_a_server_starts_one_that_schedules_and_hears_events(first_model,
                                                                          tmp_path):
    """`tcl serve` on the embedded default (no PREFECT_API_URL): it starts a Prefect server on
    loopback, the cron-scheduled refresh runs, `tcl device add` from another process finds the
    server and its event triggers the add-device deployment; SIGTERM stops both."""
    import os
    import urllib.request

    from tcl.registry import ModelRegistry

    params = first_model
    root = params.source.parent
    raw = yaml.safe_load(params.source.read_text())
    raw["add_device"]["refresh_cron"] = "* * * * *"
    (root / "params-serve.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS="5", TVM_LOG_LEVEL="WARNING")
    info_file = tmp_path / "prefect" / "tcl-serve.json"
    log = tmp_path / "serve.log"       # a file, not a pipe: nothing reads it until the end
    with open(log, "w") as out:
        serve = subprocess.Popen([sys.executable, "-m", "tcl.cli", "serve", "--params",
                                  "params-serve.yaml"], cwd=root, env=env, text=True,
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait(info_file.exists, 240, "tcl serve's Prefect server", [serve])
        url = json.loads(info_file.read_text())["api_url"]

        _wait(lambda: _flow_runs(url, "refresh", "COMPLETED"), 300, "the scheduled refresh",
              [serve])
        add = subprocess.run([sys.executable, "-m", "tcl.cli", "device", "add", "board4",
                              "--target", BOARD, "--params", "params-serve.yaml"], cwd=root,
                             env=env, text=True, capture_output=True, timeout=120)
        assert add.returncode == 0, add.stderr
        assert "emitted 'board4' as tcl.device.added" in add.stdout
        try:
            _wait(lambda: ModelRegistry(params.paths).latest("board4") is not None, 600,
                  "the add-device run triggered by the event", [serve])
        except AssertionError as e:   # say what the server saw (it once missed the event in CI)
            runs = {s: [(r.get("state") or {}).get("message") for r in
                        _flow_runs(url, "add-device", s)] for s in ("FAILED", "RUNNING")}
            raise AssertionError(f"{e}; add-device runs by state: {runs}; serve log ends:\n"
                                 f"{log.read_text()[-3000:]}") from None
    finally:
        stop_group(serve)
    assert "started a Prefect server at" in log.read_text()
    assert not info_file.exists()                      # unregistered on exit
    with pytest.raises(OSError):                       # and its server is gone
        urllib.request.urlopen(f"{url}/health", timeout=2)
