"""``tcl tune``: tune a network's Relax module with MetaSchedule, driven by a chosen cost model;
compile it with the tuned database, check it against PyTorch and time it end to end.

The modules, each importing only those above it in this list:

- ``expect``: the latency a budget buys, from the published budget curves (for the dry run);
- ``winograd``: Winograd F(2x2,3x3) and F(4x4,3x3) for stride-1 3x3 convolutions (``tcl tune
  --conv``);
- ``choices``: the layout and convolution algorithm chosen when the user names none (``auto``);
- ``layout``: how the network is laid out for tuning and compiled (``tcl tune --layout``:
  ``network_module``, ``tunable_tasks``, ``compile_network``);
- ``plan``: the settings and their defaults, the network instance, trials per round, the task
  scheduler, and ``plan_tuning`` (the dry run: what a run would do and about how long it would
  take, without tuning);
- ``frameworks``: PyTorch eager and onnxruntime timed as a user would run them;
- ``timing``: where the tuning time went (``time_split``) and the compiled network's time
  beside PyTorch's and onnxruntime's (``time_compiled``, ``retime``);
- ``result``: ``TuneResult`` and the lines printed about it;
- ``resume``: what an output directory holds, and resuming an interrupted run there;
- ``curve``: the curve as the search measures, and its files;
- ``run``: ``tune_network`` (four steps: ``prepare``, ``search``, ``verify``, ``finish``) and
  the cost model it searches with.

Everything a caller needs is imported here: ``from tcl.tune import tune_network``.
"""
from .curve import progress_callback, write_curve
from .frameworks import eager_ms, onnxruntime_ms, onnxruntime_session, onnxruntime_version
from .expect import CURVES_FILE, Expectation, expected_latency, read_curves
from .plan import (ASSUMED_SEARCH_S_PER_SCORED, METASCHEDULE_SEARCH, MODELS_HELP, ONLINE,
                   SCHEDULERS, TCL_SEARCH, TCL_UPDATE, UPDATE_MODES, TuningPlan, plan_tuning,
                   resolve_instance, task_scheduler, trials_per_iter, tuning_defaults)
from .result import TuneResult, report_lines, versus_line
from .resume import CURVE_FILE, RUN_FILE, ResumeState, prepare_out, resume_state
from .layout import (LAYOUT_HELP, LAYOUTS, compile_choices, compile_network, network_module,
                     tunable_tasks)
from .run import TOLERANCE, cost_model_for, tune_network
from .choices import AUTO, AUTO_HELP, CompileChoices, choose
from .winograd import CONV_ALGORITHMS, CONV_HELP
from .timing import SPLIT, Timed, measure_in_pinned_process, retime, time_compiled, time_split

__all__ = [
    "ASSUMED_SEARCH_S_PER_SCORED", "AUTO", "AUTO_HELP", "CompileChoices", "choose",
    "CONV_ALGORITHMS", "CONV_HELP", "CURVE_FILE", "CURVES_FILE",
    "Expectation", "LAYOUT_HELP",
    "LAYOUTS", "compile_choices", "compile_network", "network_module", "tunable_tasks",
    "eager_ms", "expected_latency", "onnxruntime_ms", "onnxruntime_session",
    "onnxruntime_version", "read_curves", "METASCHEDULE_SEARCH", "MODELS_HELP", "ONLINE",
    "RUN_FILE", "SCHEDULERS", "SPLIT", "TCL_SEARCH", "TCL_UPDATE", "TOLERANCE", "UPDATE_MODES",
    "ResumeState", "Timed", "TuneResult", "TuningPlan", "cost_model_for",
    "measure_in_pinned_process",
    "plan_tuning", "prepare_out", "progress_callback", "report_lines", "resolve_instance",
    "resume_state", "retime", "task_scheduler", "time_compiled", "time_split",
    "trials_per_iter", "tune_network", "tuning_defaults", "versus_line", "write_curve",
]
