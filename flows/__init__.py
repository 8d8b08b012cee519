"""Prefect flows, every one tcl has: one per pipeline stage plus ``pipeline``, and the add-device
and refresh flows that ``tcl serve`` serves; each a thin wrapper over tcl.pipeline, and each
registered by its name in pyproject.toml (the ``tcl.flows`` entry points).

Run one with ``python -m flows.pipeline --params params.yaml`` (or flows.zoo, flows.sample,
flows.measure, flows.featurize, flows.train, flows.evaluate, flows.add_device, flows.refresh).
Without ``PREFECT_API_URL`` they run in Prefect's ephemeral mode (a temporary local API, no
server to start). Importing this package sets Prefect defaults that the caller has not set:
analytics off, a patient ephemeral startup (busy cores), and ``PREFECT_HOME`` in ``.prefect/``
under the data root (``tcl.pipeline.prefect_setup``). tcl, its CLI included, never imports this
package: the CLI starts the flows it runs or serves (``tcl device add``, ``tcl serve``) by
name, through ``tcl.pipeline.prefect_setup.flow_named``.
"""
import flows._common  # noqa: F401  (sets the defaults on import)
