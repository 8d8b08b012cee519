"""How the network is laid out for tuning and compiled afterwards (``tcl tune --layout``).

- ``nchw`` (the default): PyTorch's data layout as exported, the weights bound as constants in
  PyTorch's layout (``zoo.extract.relax_module``'s module, the zoo's task ids);
  ``relax_integration.compile_relax`` applies the tuned database.
- ``prepack``: the same module, its PrimFuncs' weight buffers marked layout-free
  (``AttachAttrLayoutFreeBuffers``) before the tasks are extracted, so MetaSchedule's
  ``RewriteLayout`` postprocessor may lay each weight out as the tuned schedule reads it. The
  compile step splits that rewrite out of the tuned kernels (``SplitLayoutRewritePreproc``) and
  folds it on the constant weights (``FoldConstant``): the compiled network takes the same inputs.
- ``nchwc``: conv2d in the blocked NCHW[x]c layout (x: the target's fp32 vector lanes), by
  ``ConvertLayout`` before legalization. Relax 0.27 cannot legalize a blocked conv2d (it logs
  "channel chunk cannot be legalized by TOPI" and the VM build fails on the unlowered
  ``R.nn.conv2d``), so it is legalized here with TOPI's ``conv2d_NCHWc``. The weights' layout
  transforms fold in the zero pipeline; the activations' run between a blocked convolution and
  the layers that stay NCHW (convolutions whose channels the block does not divide, grouped
  ones, the head).

Any layout may add ``fast_math`` (``tcl tune --fast-math``): erf, exp, tanh and softmax become
TOPI's fast approximations (Relax's ``FastMathTransform``) and gelu is legalized through
``fast_erf``. LLVM has no vector erf: Relax's exact gelu calls libm's ``erff`` per element, which
makes it one of bert_tiny's slowest kernels (``benchmarks/layer_table.py``). onnxruntime's own
Gelu is a polynomial too.

Any layout may also leave out fusion (``tcl tune --no-fuse``): Relax's zero pipeline without
``FuseOps`` and ``FuseTIR``, so every operator is its own kernel and task. It measures what
fusion is worth at equal trials per task, and its per-kernel profile is one per operator.

Tasks that read weights (``prepack``), are laid out otherwise (``nchwc``), compute with fast
math or are not fused are not the zoo's: their records join the store as imported tasks.
"""
from __future__ import annotations

from contextlib import nullcontext

from ..config import TclError
from ..tvm_compat import compile_database, meta_schedule
from ..zoo.extract import exported_module
from . import winograd

LAYOUTS = ("nchw", "prepack", "nchwc")
LAYOUT_HELP = ("how the network is laid out and compiled: nchw (the default: PyTorch's layout), "
               "prepack (MetaSchedule may rewrite each weight's layout for its tuned kernel; "
               "the rewrite folds at compile time), nchwc (convolutions in blocked NCHW[x]c, x "
               "the target's fp32 vector lanes, weights transformed at compile time)")
_PIPELINE = "relax zero + meta_schedule.compile_relax"


def check_layout(layout: str) -> str:
    if layout not in LAYOUTS:
        raise TclError(f"layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
    return layout


def block_lanes(target) -> int:
    """fp32 lanes of the target's widest vector (the NCHW[x]c block). From its features:
    ``llvm_get_vector_width`` answers 512 for every x86 mcpu in TVM 0.27."""
    from tvm.target.codegen import target_has_features

    return 16 if target_has_features("avx512f", target) else \
        8 if target_has_features("avx", target) else 4


FAST_MATH = ("erf, exp, tanh and softmax as TOPI's fast approximations (FastMathTransform), "
             "gelu through fast_erf")


FUSED = "Relax's FuseOps + FuseTIR: elementwise and injective operators into their producer"
UNFUSED = "none: one kernel per operator (the zero pipeline without FuseOps and FuseTIR)"


def describe(layout: str, target, fast_math: bool = False, fuse: bool = True,
             conv: str = "direct") -> dict:
    """summary.json's "compile": the data layout, the weights', the pipeline, the math, the
    fusion and the 3x3 convolutions' algorithm."""
    d = _describe_layout(layout, target)
    if fast_math:
        d["pipeline"] = "FastMathTransform + fast gelu + " + d["pipeline"]
    if winograd.tile_size(conv):
        d["pipeline"] = "Winograd rewrite + " + d["pipeline"]
    return {**d, "math": FAST_MATH if fast_math else "exact",
            "fusion": FUSED if fuse else UNFUSED, "conv": winograd.describe(conv),
            "conv_option": conv}


def run_suffix(layout: str, fast_math: bool = False, fuse: bool = True,
               conv: str = "direct") -> str:
    """What a run directory's name adds for the choices other than the defaults."""
    return ("" if layout == "nchw" else f"-{layout}") + ("-fastmath" if fast_math else "") + \
        ("" if fuse else "-nofuse") + ("" if conv == "direct" else f"-{conv.replace('-', '')}")


def compile_choices(summary: dict) -> dict:
    """A finished run's ``layout``, ``fast_math``, ``fuse`` and ``conv`` (``network_module``'s
    keywords) from its summary.json: runs from before an option had its default."""
    c = summary.get("compile", {})
    return {"layout": c.get("layout_option", "nchw"),
            "fast_math": c.get("math", "exact") != "exact",
            "fuse": c.get("fusion", FUSED) != UNFUSED,
            "conv": c.get("conv_option", "direct")}


def _describe_layout(layout: str, target) -> dict:
    if layout == "prepack":
        return {"layout": "NCHW", "weights": "constants, laid out by each tuned kernel's "
                "RewriteLayout, folded at compile time",
                "pipeline": "relax zero + AttachAttrLayoutFreeBuffers; compile_relax's passes "
                "+ SplitLayoutRewritePreproc, FoldConstant", "layout_option": layout}
    if layout == "nchwc":
        x = block_lanes(target)
        return {"layout": f"NCHW{x}c (conv2d), NCHW elsewhere",
                "weights": f"constants, OIHW{x}i{x}o for blocked conv2d, folded at compile time",
                "pipeline": f"ConvertLayout + conv2d_NCHWc legalization + {_PIPELINE}",
                "layout_option": layout}
    return {"layout": "NCHW", "weights": "constants, PyTorch's layout", "pipeline": _PIPELINE,
            "layout_option": layout}


def network_module(inst, model=None, example: tuple | None = None, layout: str = "nchw",
                   target=None, fast_math: bool = False, fuse: bool = True,
                   conv: str = "direct"):
    """The network as the legalized and fused Relax module that is tuned and compiled in
    ``layout`` (``target``: the device's, which sets the NCHW[x]c block), with ``fast_math``
    its erf, exp, tanh, softmax and gelu as TOPI's fast approximations (``FAST_MATH``);
    ``fuse`` False: every operator its own kernel; ``conv``: the algorithm of stride-1 3x3
    convolutions (``tcl.tune.winograd``)."""
    return lowered_module(exported_module(inst, model, example), layout, target, fast_math,
                          fuse, conv)


def lowered_module(mod, layout: str = "nchw", target=None, fast_math: bool = False,
                   fuse: bool = True, conv: str = "direct"):
    """``network_module`` of an exported Relax module (a network or a single layer's)."""
    import tvm
    from tvm import relax

    check_layout(layout)
    legalize = {}   # op -> a legalization other than Relax's own
    if fast_math:
        # before legalization: the pass rewrites Relax's ops, not their TIR
        mod = relax.transform.FastMathTransform()(mod)
        legalize.update(_fast_gelu())
    # before ConvertLayout: the Winograd convolutions stay NCHW, the others may be blocked
    mod = winograd.rewrite(mod, conv)
    if layout == "nchwc":
        x = block_lanes(target)
        mod = relax.transform.ConvertLayout(
            {"relax.nn.conv2d": [f"NCHW{x}c", f"OIHW{x}i{x}o"]})(mod)
        legalize["relax.nn.conv2d"] = _conv2d_nchwc
    if legalize:
        with tvm.target.Target(target) if target is not None else nullcontext():
            mod = relax.transform.LegalizeOps(legalize)(mod)   # conv2d_NCHWc reads the target
    # Without legalization MetaSchedule finds no TIR functions to tune.
    mod = tvm.transform.Sequential(_legalized(fuse))(mod)
    if layout == "prepack":
        mod = _without_empty_layout_free(relax.transform.AttachAttrLayoutFreeBuffers()(mod))
    return mod


def _legalized(fuse: bool) -> list:
    """Relax's zero pipeline (``relax.get_pipeline("zero")`` with no database: what
    ``compile_relax`` runs before it applies one), without its fusion unless ``fuse``."""
    from tvm import relax

    t = relax.transform
    return [t.LegalizeOps(), t.AnnotateTIROpPattern(), t.FoldConstant(),
            *([t.FuseOps(), t.FuseTIR()] if fuse else [])]


def tunable_tasks(mod, target) -> list:
    """MetaSchedule's tasks of ``mod`` (``network_module``'s) that a search tunes: an already
    scheduled one has nothing to tune (tune_relax skips it too)."""
    return [t for t in meta_schedule().relax_integration.extract_tasks(mod, target)
            if not t.mod.attrs.get("tirx.is_scheduled", False)]


def _conv2d_nchwc(bb, call):
    """conv2d legalized in its blocked layout (TOPI's ``conv2d_NCHWc``), which Relax 0.27 lacks;
    one ConvertLayout left in NCHW gets TOPI's own."""
    from tvm import topi
    from tvm.relax.transform.legalize_ops.nn import _nn_conv2d

    a = call.attrs
    if len(a.data_layout) == 4:
        return _nn_conv2d(bb, call)
    return bb.call_te(topi.nn.conv2d_NCHWc, call.args[0], call.args[1], a.strides,
                      a.padding, a.dilation, a.data_layout, a.out_layout,
                      a.out_dtype if a.out_dtype != "" else call.args[0].ty.dtype,
                      primfunc_name_hint="conv2d_NCHWc")


def _fast_gelu() -> dict:
    """gelu and its tanh form through TOPI's fast erf and tanh (Relax legalizes them with the
    exact ones, which LLVM calls per element: ``FastMathTransform`` leaves gelu alone)."""
    import math

    from tvm import tirx, topi

    def gelu(bb, call):
        def te(x):
            half = tirx.const(0.5, x.dtype)
            return x * (half + topi.fast_erf(x * tirx.const(0.5 ** 0.5, x.dtype)) * half)
        return bb.call_te(te, call.args[0], primfunc_name_hint="fast_gelu")

    def gelu_tanh(bb, call):
        def te(x):
            c = tirx.const(math.sqrt(2.0 / math.pi), x.dtype)
            inner = c * x * (1 + tirx.const(0.044715, x.dtype) * x * x)
            return tirx.const(0.5, x.dtype) * x * (1 + topi.fast_tanh(inner))
        return bb.call_te(te, call.args[0], primfunc_name_hint="fast_gelu_tanh")

    return {"relax.nn.gelu": gelu, "relax.nn.gelu_tanh": gelu_tanh}


def _without_empty_layout_free(mod):
    """``mod`` with the empty ``layout_free_buffers`` attributes dropped: the pass puts one on
    every PrimFunc, so a task that reads no weight keeps the zoo's task id (and its records)."""
    import tvm

    funcs = {}
    for gv, func in mod.functions.items():
        if isinstance(func, tvm.tirx.PrimFunc) and func.attrs is not None and \
                "layout_free_buffers" in func.attrs and not func.attrs["layout_free_buffers"]:
            func = func.without_attr("layout_free_buffers")
        funcs[gv] = func
    return tvm.IRModule(funcs, attrs=mod.attrs)


def compiled_by_compile_relax(layout: str, fuse: bool) -> bool:
    """Whether ``compile_network`` hands a run of these choices to MetaSchedule's
    ``compile_relax`` whole (which looks each fused function up in the database), or applies
    the tuned kernels first (prepack, unfused)."""
    return check_layout(layout) != "prepack" and fuse


def compile_network(database, mod, target, layout: str = "nchw", fuse: bool = True):
    """The network ``mod`` (``network_module``'s, in ``layout``, fused or not as ``fuse``
    says) compiled with the tuned schedules of ``database``: a Relax VM executable."""
    import tvm
    from tvm import relax
    from tvm.relax.backend.cpu_generic import pipeline

    if compiled_by_compile_relax(layout, fuse):
        return meta_schedule().relax_integration.compile_relax(compile_database(database), mod,
                                                               target, None)
    # compile_relax fuses before it applies the database: an unfused module's kernels would
    # become new fused ones that no record tunes
    mod = applied_module(database, mod, target, layout, fuse)
    # the rest of compile_relax's pipeline: lowering and finalizing
    lower = tvm.transform.Sequential([*pipeline.dataflow_lower_passes(target),
                                      *pipeline.finalize_passes(target)])
    with target, tvm.transform.PassContext(opt_level=3):
        return relax.build(mod, target=target, relax_pipeline=lower)


def applied_module(database, mod, target, layout: str = "nchw", fuse: bool = True):
    """``mod`` (``network_module``'s) with the tuned kernels of ``database`` applied, as
    ``compile_relax`` applies them, fusing only if ``fuse``. In ``prepack`` each weight's
    layout rewrite is then split out of its kernel and folded into the constant
    (``static_shape_tuning_pipeline``'s ``cpu_weight_prepack``; its LiftTransformParams has
    nothing to lift here: the weights are constants, not parameters): a Relax module whose
    ``main`` takes the network's inputs alone, as PyTorch's does."""
    import tvm
    from tvm import relax
    # what compile_relax runs before and with the database, from the CPU backend's module:
    # relax.pipeline's dispatchers fail for llvm in TVM 0.27 (its cpu_generic package does not
    # export dataflow_lower_passes; compile_relax falls back to a copy of the same list)
    from tvm.relax.backend.cpu_generic import pipeline

    t = relax.transform
    prepack = [t.SplitLayoutRewritePreproc(), t.FoldConstant(), t.DeadCodeElimination()] \
        if layout == "prepack" else []
    with target, compile_database(database), tvm.transform.PassContext(opt_level=3):
        return tvm.transform.Sequential([
            *pipeline.library_dispatch_passes(target), *_legalized(fuse),
            t.MetaScheduleApplyDatabase(), *prepack])(mod)
