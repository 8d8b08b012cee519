"""The pipeline: the only library code that reads ``Params`` (``params.py``). The CLI and the
Prefect flows in ``flows/`` are thin faces over it.

- ``inputs``: the params turned into the library's inputs (the selected network instances and
  their tasks, the active collection's ``Selection``, measurement and retry settings);
- ``stages``: the stages ``zoo`` ... ``evaluate`` (``tcl stage NAME``, the DVC stages, the flows);
- ``continual``: the continual run (``distill_device``: teacher, subset, fit, evaluate, register);
- ``add_device``: the add-device run as steps; ``refresh``: the scheduled re-distillation;
- ``status``: ``tcl status``; ``scale_out``: the Prefect task runner and the Dask builder;
- ``events``, ``prefect_setup``, ``deployments``: Prefect's events, defaults, and the
  deployments and server of ``tcl serve`` (the flows themselves are in ``flows/``).

Nothing is re-exported here, so importing ``tcl.pipeline.params`` loads no stage; ``STAGES``
is here for the same reason (the CLI's parser names them).
"""

# The stages, in order (``tcl stage NAME``; each a ``run_*`` function of ``stages``).
STAGES = ("zoo", "sample", "measure", "featurize", "train", "select", "distill", "evaluate")
