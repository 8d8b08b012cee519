"""The data card from real measurements of one tiny task on two device profiles."""
import pytest

from conftest import matmul_task, write_tasks
from tcl import datacard
from tcl.cli import main
from tcl.config import TclError
from tcl.measure.devices import create
from tcl.store.devices import BUILTIN_DEVICES
from tcl.measure.collect import collect
from tcl.sampling import ensure_candidates

pytestmark = pytest.mark.slow
DEVICES = [BUILTIN_DEVICES["cpu-avx2"], BUILTIN_DEVICES["cpu-sse42"]]
PROGRAMS = 8


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    from tcl.config import Paths

    for d in DEVICES:
        try:
            create(d).check_runnable()
        except TclError as e:
            pytest.skip(str(e))
    paths = Paths(tmp_path_factory.mktemp("card") / "data")
    task = matmul_task(64)
    tasks = write_tasks(paths, [task])
    ensure_candidates(paths, task["task_id"], task["workload_json"], PROGRAMS)
    for d in DEVICES:
        collect(paths, d, tasks, PROGRAMS, progress=False)
    return paths


def test_card_counts_noise_landscapes_and_plot(measured, tmp_path):
    card = datacard.build(measured, tmp_path, min_programs=PROGRAMS // 2)  # a timeout may hit
    summary = card["summary"]
    assert summary["device"].to_list() == ["cpu-avx2", "cpu-sse42"]
    assert summary["programs"].to_list() == [PROGRAMS, PROGRAMS]
    assert (summary["collect_hours"] > 0).all()
    assert (card["noise"]["median_cv"] >= 0).all()
    pair = card["devices"].row(0, named=True)  # same programs, two devices, one task
    assert (pair["device_a"], pair["device_b"], pair["tasks"]) == ("cpu-avx2", "cpu-sse42", 1)
    assert -1 <= pair["median"] <= 1 and 0 < pair["best_transfer"] <= 1
    by_class = card["devices_by_class"]
    assert by_class["op_class"].to_list() == ["dense"] and by_class["tasks"].to_list() == [1]
    assert card["plot"].stat().st_size > 0
    text = datacard.render(card)
    assert "### Device landscapes per operator class" in text and "cpu-sse42" in text


def test_remeasure_is_a_fresh_second_run_of_whole_tasks(measured):
    pairs = datacard.remeasure_sample(measured, "cpu-avx2", fraction=0.01,
                                      min_programs=PROGRAMS // 2)
    assert len(pairs) >= PROGRAMS // 2 and pairs["latency2"].is_not_null().sum() >= 3
    summary = datacard.remeasure_correlation(pairs)
    assert summary["tasks"] == 1 and -1 <= summary["median_spearman"] <= 1
    assert summary["median_relative_change"] >= 0
    # Tasks with fewer ok programs than min_programs are never chosen.
    empty = datacard.remeasure_sample(measured, "cpu-avx2", min_programs=PROGRAMS + 1)
    assert empty.is_empty()


def test_datacard_command_writes_the_card(measured, tmp_path, capsys):
    out = tmp_path / "card"
    assert main(["--data", str(measured.root), "datacard", "--out", str(out)]) == 0
    assert (out / "datacard.md").read_text() == capsys.readouterr().out
    assert (out / "latency-distribution.png").exists()
