"""The workload zoo: networks (``networks``, ``families``, ``layers``, the user's own in
``user``) and their tuning tasks (``extract``).

How long a user network's factory may take (``tcl zoo add``, ``zoo.factory_timeout_s``) is here,
where the params and the CLI's parser read it without importing torch."""

DEFAULT_FACTORY_TIMEOUT_S = 300.0   # zoo.factory_timeout_s where no params file is read
FACTORY_TIMEOUT_RANGE = (1.0, 86400.0)   # zoo.factory_timeout_s and tcl zoo add --timeout
