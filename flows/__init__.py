"""Prefect flows, every one tcl has: one per pipeline stage plus ``pipeline``, and the add-device
and refresh flows that ``tcl serve`` serves (``serve``); each a thin wrapper over tcl.pipeline.

Run one with ``python -m flows.pipeline --params params.yaml`` (or flows.zoo, flows.sample,
flows.measure, flows.featurize, flows.train, flows.evaluate, flows.add_device, flows.refresh).
Without ``PREFECT_API_URL`` they run in Prefect's ephemeral mode (a temporary local API, no
server to start). Importing this package sets Prefect defaults that the caller has not set:
analytics off, a patient ephemeral startup (busy cores), and ``PREFECT_HOME`` in ``.prefect/``
under the data root (``tcl.pipeline.prefect_setup``). The library never imports this package;
only the CLI does, lazily, for the flows it runs or serves (``tcl device add``, ``tcl serve``).
"""
import flows._common  # noqa: F401  (sets the defaults on import)
