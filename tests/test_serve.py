"""What a served flow accepts (issue 22): an event names only the device, a served run uses only
the params file (and data root) `tcl serve` was started with; and every `python -m flows.*`
entry point rejects bad input in one line before Prefect starts. The real-server run of the
event is `test_add_device.py::test_the_event_triggers_the_served_add_device_deployment`."""
from __future__ import annotations

import copy
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import stop_group
from flows._common import main  # first: Prefect's defaults (the ephemeral start-up timeout)
from tcl.config import TclError
from tcl.pipeline.events import SERVED_PARAMS, TRIGGER_PARAMETERS, served_params

ROOT = Path(__file__).resolve().parents[1]
ENTRY_POINTS = sorted(p.stem for p in (ROOT / "flows").glob("*.py")
                      if 'if __name__ == "__main__":' in p.read_text())


@pytest.fixture
def served(tmp_path, monkeypatch) -> Path:
    """The tiny params file in a data root of its own; SERVED_PARAMS restored after the test."""
    monkeypatch.setenv(SERVED_PARAMS, "")
    params_file = tmp_path / "served" / "params.yaml"
    params_file.parent.mkdir()
    params_file.write_text((ROOT / "tests" / "tiny_params.yaml").read_text())
    return params_file


def _render(parameters: dict, event) -> dict:
    """The trigger's parameters rendered against ``event`` with the code Prefect's server runs
    (``RunDeployment.render_parameters``: its templates upgraded, then ``hydrate`` with Jinja)."""
    from prefect.server.events.actions import RunDeployment
    from prefect.utilities.schema_tools.hydration import HydrationContext, hydrate

    parameters = copy.deepcopy(parameters)
    RunDeployment._upgrade_v1_templates(parameters)
    return hydrate(parameters, HydrationContext(raise_on_error=True, render_jinja=True,
                                                jinja_context={"event": event}))


def test_an_event_names_only_the_device_of_the_served_run(served, tmp_path):
    from prefect.events import Event

    from flows.add_device import add_device as add_device_flow
    from flows.refresh import refresh as refresh_flow
    from tcl.pipeline.deployments import deployments

    add_device, refresh = deployments(str(served), add_device_flow, refresh_flow)
    bound = str(served.resolve())
    assert add_device.parameters == refresh.parameters == {"params_file": bound}
    # imported by module path in the run, so tcl's modules load once (not as a script's package)
    assert (add_device.entrypoint, refresh.entrypoint) == ("flows.add_device.add_device",
                                                           "flows.refresh.refresh")
    assert add_device.triggers[0].parameters == TRIGGER_PARAMETERS
    other = tmp_path / "other" / "params.yaml"      # another data root's params: never read
    crafted = Event(event="tcl.device.added",
                    resource={"prefect.resource.id": "board", "params_file": str(other)},
                    payload={"params_file": str(other), "data": str(tmp_path / "other"),
                             "params": str(other)})
    run = {**add_device.parameters, **_render(TRIGGER_PARAMETERS, crafted)}  # as the server merges
    assert run == {"device": "board", "params_file": bound, "event_params_file": str(other)}
    with pytest.raises(TclError, match=f"event's params file '{other}' is not {bound}"):
        served_params(run["params_file"], run["event_params_file"])
    # the run's own parameter (e.g. set through the API) is held to the same file
    with pytest.raises(TclError, match=f"the run's params_file '{other}' is not {bound}"):
        served_params(str(other))
    # an event that names this file, or none (a bare `prefect event emit`), runs on it
    plain = Event(event="tcl.device.added", resource={"prefect.resource.id": "board"})
    for event, named in ((plain, ""), (crafted.model_copy(update={"payload": {
            "params_file": bound}}), bound)):
        run = {**add_device.parameters, **_render(TRIGGER_PARAMETERS, event)}
        assert run["event_params_file"] == named
        assert served_params(run["params_file"], run["event_params_file"]).source == served


def test_a_served_run_refuses_other_params_and_path_like_devices(served, tmp_path):
    """The add-device flow in a served process: a refusal is a Failed run whose message says
    why, and nothing is read or written (the other params file does not even exist)."""
    from flows.add_device import add_device
    from flows.refresh import refresh
    from tcl.pipeline.deployments import deployments

    deployments(str(served), add_device, refresh)        # binds, as `tcl serve` does
    other = tmp_path / "other" / "params.yaml"
    for device, params_file, event_params_file, why in (
            ("cpu-avx2", str(other), "", "the run's params_file"),
            ("cpu-avx2", str(served), str(other), "the event's params file"),
            ("../../etc", str(served), "", "invalid device name"),
            ("nosuch", str(served), "", "unknown device")):
        state = add_device(device=device, params_file=params_file,
                           event_params_file=event_params_file, return_state=True)
        assert state.is_failed() and state.message.startswith(f"refused: {why}"), state
    assert not other.parent.exists()
    assert not (served.parent / "data").exists()        # the bound root: nothing written


def test_every_flow_entry_point_rejects_a_bad_params_file_in_one_line(tmp_path, capsys):
    """Every ``flows/*.py`` with a ``__main__`` (its ``main(FLOW)`` called as ``python -m`` would):
    exit 2 and one stderr line naming the file, before any flow run (or Prefect) starts."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("data: data\ndevices: [no-such-device]\n")
    assert {"pipeline", "add_device", "refresh"} <= set(ENTRY_POINTS)
    for module in ENTRY_POINTS:
        source = (ROOT / "flows" / f"{module}.py").read_text()
        name = re.search(r'__name__ == "__main__":\n    sys\.exit\(main\((\w+)\)\)', source)
        assert name, f"flows/{module}.py: its __main__ is not sys.exit(main(FLOW))"
        flow = getattr(importlib.import_module(f"flows.{module}"), name.group(1))
        argv = ["--params", str(bad)] + (["--device", "cpu-avx2"] if module == "add_device"
                                         else [])
        assert main(flow, argv) == 2, module
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"{flow.name}: error: {bad}: "), (module, err)


def test_one_retry_rule_for_every_flow_task():
    """Issue 41: the measure, select and add-device tasks retry by one rule
    (``flows._common.transient``): the tracker or runner failing, or an unexpected error, is
    retried; bad input and an interrupt (TclErrors) are not, nor a success."""
    from flows import add_device, measure, select
    from flows._common import transient
    from tcl.measure.interrupt import InfrastructureFailure, Interrupted

    class State:
        def __init__(self, error=None):
            self.error = error

        def result(self):
            if self.error is not None:
                raise self.error

    retried = {name: transient(None, None, State(e)) for name, e in (
        ("infrastructure", InfrastructureFailure("tracker gone")),
        ("unexpected", RuntimeError("runner worker died")),
        ("bad input", TclError("unknown device")), ("interrupt", Interrupted(2, "stopped")),
        ("success", None))}
    assert retried == {"infrastructure": True, "unexpected": True, "bad input": False,
                       "interrupt": False, "success": False}
    for task in (measure.measure_device, select.select_device, add_device.select_task,
                 add_device.measure_task, add_device.evaluation_task):
        assert task.retry_condition_fn is transient, task.name


def test_python_m_flows_prints_one_line_and_no_traceback(served, tmp_path):
    """Through a real ``python -m``: a bad params.yaml (the pipeline) and a path-like device
    (add-device); side by side, each is a Python start."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("data: [\n")
    runs = {"pipeline": ["--params", str(bad)],
            "add_device": ["--params", str(served), "--device", "../etc"]}
    procs = {m: subprocess.Popen([sys.executable, "-m", f"flows.{m}", *a], cwd=tmp_path,
                                 text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for m, a in runs.items()}
    outs = {m: p.communicate(timeout=300) + (p.returncode,) for m, p in procs.items()}
    for module, (out, err, code) in outs.items():
        assert code == 2 and len(err.strip().splitlines()) == 1, (module, out, err)
        assert "Traceback" not in out + err and "flow run" not in out + err, (module, err)
    assert outs["pipeline"][1].startswith(f"pipeline: error: {bad}: not valid YAML")
    assert outs["add_device"][1].strip() == (
        "add-device: error: invalid device name '../etc': expected 1 to 64 ASCII letters, "
        "digits, '.', '-' and '_', starting with a letter or digit (no '..', no trailing '.'); "
        "'/' (U+002F) is not allowed")


def test_a_served_refusal_is_one_line_and_an_unknown_parameter_is_refused(served, tmp_path):
    """Issue 38: `tcl serve` printed Prefect's 40-line traceback for every run it refused, and a
    run created through the API with a parameter the flow does not take crashed in the served
    process. On a real Prefect server: an event naming an unknown device ends in a refused
    Failed run, one line in serve's output; the API refuses to create a run with an unknown
    parameter, naming it."""
    import json
    import os
    import time
    import urllib.error
    import urllib.request

    from test_add_device import _flow_runs, _free_port, _prefect_server, _wait

    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_API_URL=api, TVM_LOG_LEVEL="WARNING")
    log, procs = tmp_path / "serve.log", []

    def deployment() -> dict | None:
        try:
            with urllib.request.urlopen(f"{api}/deployments/name/add-device/add-device",
                                        timeout=10) as r:
                return json.loads(r.read())
        except OSError:
            return None
    try:
        _prefect_server(env, port, procs)
        with open(log, "w") as out:   # a file, not a pipe: nothing reads it until the end
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "tcl.cli", "serve", "--params", str(served)],
                cwd=served.parent, env=env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True))
        _wait(deployment, 180, "tcl serve's deployments", procs)
        subprocess.run([sys.executable, "-c", "import sys; from tcl.pipeline.events import "
                        "emit_device_added; emit_device_added(sys.argv[1], sys.argv[2])",
                        "nosuch", str(served)], env=env, check=True, timeout=120)
        _wait(lambda: _flow_runs(api, "add-device", "FAILED"), 300, "the refused run", procs)
        [refused] = _flow_runs(api, "add-device", "FAILED")
        assert refused["state"]["message"].startswith("refused: unknown device 'nosuch'")
        create = urllib.request.Request(
            f"{api}/deployments/{deployment()['id']}/create_flow_run",
            data=json.dumps({"parameters": {"device": "cpu-avx2", "bogus": 1}}).encode(),
            headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(create, timeout=10)
        assert e.value.code == 409 and "('bogus' was unexpected)" in e.value.read().decode()
        assert len(_flow_runs(api, "add-device", "FAILED")) == 1   # no run was created
        _wait(lambda: "Finished in state Failed" in log.read_text(), 60, "the run's end", procs)
        time.sleep(5)   # what Prefect logs after the run's end (its traceback, before the fix)
    finally:
        for p in reversed(procs):   # tcl serve first: it pauses its deployments on the server
            stop_group(p)
    text = log.read_text()
    assert "Traceback" not in text, text[-5000:]
    errors = [line for line in text.splitlines() if "| ERROR" in line]
    assert len(errors) == 1 and "refused: unknown device 'nosuch'" in errors[0], text[-5000:]


def test_the_registry_of_flows_names_every_flow_by_its_prefect_name():
    """pyproject.toml's ``tcl.flows`` entry points (``tcl.pipeline.prefect_setup.flow_named``,
    how the CLI starts a flow): one per module of flows/ with a ``__main__``, each the flow that
    module runs under the Prefect name it is registered by; ``tcl device add`` and ``tcl serve``
    ask for names it holds. Read from the file, as an install of it registers them."""
    import tomllib

    registry = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "entry-points"]["tcl.flows"]
    assert sorted(v.split(":")[0] for v in registry.values()) == \
        sorted(f"flows.{m}" for m in ENTRY_POINTS)
    for name, target in registry.items():
        module, attr = target.split(":")
        flow = getattr(importlib.import_module(module), attr)
        assert flow.name == name, (name, flow.name)
        assert f"sys.exit(main({attr}))" in (ROOT / f"{module.replace('.', '/')}.py").read_text()
    cli = "".join((ROOT / "tcl" / "cli" / f).read_text() for f in ("device.py", "serve.py"))
    asked = set(re.findall(r'flow_named\("([\w-]+)"\)', cli))
    assert asked == {"add-device", "refresh"} and asked <= set(registry)


def test_a_flow_no_install_registers_is_one_line_naming_the_remedy():
    from tcl.pipeline.prefect_setup import flow_named

    with pytest.raises(TclError, match=r"no flow named 'nosuch' is installed .*pip install -e"):
        flow_named("nosuch")


def test_the_installed_registry_gives_each_flow():
    """What an install of pyproject.toml registers is what flow_named loads (an install older
    than the registry fails here, naming the remedy)."""
    import tomllib

    from tcl.pipeline.prefect_setup import flow_named

    registry = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "entry-points"]["tcl.flows"]
    for name, target in registry.items():
        module, attr = target.split(":")
        assert flow_named(name) is getattr(importlib.import_module(module), attr), name
