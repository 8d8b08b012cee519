"""A flow command's log tee leaves MetaSchedule's logger alone: MetaSchedule's logging config
lists every handler on that logger by name, and an unnamed one fails its next tuning run in
the process ('NoneType' object has no attribute 'format')."""
import logging

import pytest


def _tune_tiny(work_dir) -> None:
    from tcl.tvm_compat import meta_schedule

    ms = meta_schedule()
    from tvm import te
    from tvm.s_tir.meta_schedule.testing import te_workload
    from tvm.target import Target

    ms.tune_tir(te.create_prim_func(te_workload.matmul(16, 16, 16)),
                Target({"kind": "llvm", "num-cores": 1}), work_dir=str(work_dir),
                max_trials_global=2, num_trials_per_iter=2, num_tuning_cores=1, seed=0)


@pytest.mark.slow
def test_a_flow_command_adds_no_handler_to_meta_schedule_logger(tmp_path):
    from prefect import flow

    from tcl.config import Paths
    from tcl.pipeline.prefect_setup import run_flow_command

    _tune_tiny(tmp_path / "first")   # leaves MetaSchedule's console handler on its logger
    seen = []

    @flow(name="look-at-loggers")
    def look() -> None:
        seen.extend(h.get_name() for h in logging.getLogger("tvm.s_tir.meta_schedule").handlers)

    assert run_flow_command(look, Paths(tmp_path / "data")) == 0
    assert seen and None not in seen
    _tune_tiny(tmp_path / "second")   # and a later run in the process still tunes
