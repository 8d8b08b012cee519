"""Winograd convolution for stride-1 3x3 conv2d (``tcl tune --conv``): fewer multiplications
where the direct kernels are at the core's FLOP peak.

F(m x m, 3x3) computes an m x m output tile from an (m+2) x (m+2) input tile with (m+2)^2
multiplications per input and output channel pair instead of 9 m^2: 2.25x fewer for m = 2
(``winograd-2``), 4x fewer for m = 4 (``winograd-4``), paid for by the input and output
transforms and, for larger m, a larger rounding error (the transform matrices' entries grow).

Every eligible ``relax.nn.conv2d`` (NCHW data, OIHW weight, one group, 3x3 kernel, stride 1,
dilation 1, float32, static shapes) is rewritten before legalization into two TE calls:
- the weight transform G g G^T, laid out (alpha, alpha, CI, CO), on the constant weight: the zero
  pipeline's ``FoldConstant`` computes it at compile time, so the compiled network takes the
  same inputs and the tuned kernel reads the transformed weight;
- TOPI's ``conv2d_winograd_nchw`` with the weight pre-computed: the input transform, the batched
  GEMM and the inverse transform in one PrimFunc, one MetaSchedule task, which the CPU
  schedule rules for ``conv2d_nchw_winograd_data_pack`` and ``..._inverse`` (TVM's
  ``s_tir/meta_schedule/schedule/cpu/winograd.cc``) and multi-level tiling search.
The rewrite runs before ``ConvertLayout``, so with ``--layout nchwc`` the other convolutions
(strided, 1x1, grouped) are still blocked, and these stay NCHW.
"""
from __future__ import annotations

from ..config import TclError

CONV_ALGORITHMS = ("direct", "winograd-2", "winograd-4")
CONV_HELP = ("the algorithm of stride-1 3x3 convolutions: direct (the default), winograd-2 or "
             "winograd-4 (Winograd F(2x2,3x3) or F(4x4,3x3): 2.25x or 4x fewer multiplications, "
             "weights transformed at compile time)")


# Why a tuned Winograd network is not built yet: measured on 2026-12-07 (benchmarks/
# winograd_layers.py): the kernels tune, and the untuned network matches PyTorch, but
# compile_relax cannot apply the tuned records.
NOT_COMPILED = ("tuned Winograd kernels do not compile in TVM 0.27: compile_relax's replay of "
                "their MetaSchedule traces fails (with TVM's CPU Winograd rules: \"old_outputs"
                ".size() == new_outputs.size() (2 vs. 1)\"; with its generic rules, in "
                "ApplyAnchorTrace); benchmarks/winograd_layers.py measures the kernels alone")


def check_conv(conv: str) -> str:
    if conv not in CONV_ALGORITHMS:
        raise TclError(f"conv {conv!r}: expected one of {', '.join(CONV_ALGORITHMS)}")
    return conv


def check_compilable(conv: str) -> str:
    """``conv``, refused (before any tuning) where a tuned network of it cannot be built."""
    if tile_size(check_conv(conv)):
        raise TclError(f"--conv {conv}: {NOT_COMPILED}; use --conv direct")
    return conv


def describe(conv: str) -> str:
    """summary.json's words for ``conv``."""
    m = tile_size(conv)
    return (f"Winograd F({m}x{m},3x3) for stride-1 3x3 convolutions (weights transformed at "
            "compile time), direct elsewhere") if m else "direct"


def tile_size(conv: str) -> int:
    """The output tile m of ``conv``'s F(m x m, 3x3); 0 for the direct algorithm."""
    return 0 if check_conv(conv) == "direct" else int(conv.rsplit("-", 1)[1])


def eligible(call) -> bool:
    """Whether a ``relax.nn.conv2d`` call is one Winograd F(m x m, 3x3) computes."""
    from tvm import tirx

    a = call.attrs
    data, weight = (arg.ty for arg in call.args[:2])   # TVM 0.27: a Relax expression's struct info
    shapes = [data.shape, weight.shape]
    if any(s is None or not all(isinstance(d, tirx.IntImm) for d in s.values) for s in shapes):
        return False
    out_dtype = a.out_dtype if a.out_dtype != "" else data.dtype
    return (a.data_layout == "NCHW" and a.kernel_layout == "OIHW" and a.out_layout == "NCHW"
            and int(a.groups) == 1 and [int(k) for k in weight.shape.values[2:]] == [3, 3]
            and [int(s) for s in a.strides] == [1, 1] and [int(d) for d in a.dilation] == [1, 1]
            and data.dtype == weight.dtype == out_dtype == "float32")


def weight_transform(weight, m: int):
    """G g G^T of an OIHW 3x3 weight, laid out (alpha, alpha, CI, CO) as TOPI's pre-computed
    Winograd kernel reads it (``topi.nn.conv2d_winograd_weight_transform`` gives (.., CO, CI))."""
    from tvm import te
    from tvm.topi.nn.winograd_util import winograd_transform_matrices

    co, ci, kh, kw = (int(d) for d in weight.shape)
    _, _, G = winograd_transform_matrices(int(m), kh, str(weight.dtype))   # memoized: plain keys
    alpha = int(m) + kh - 1
    r_kh, r_kw = te.reduce_axis((0, kh), "r_kh"), te.reduce_axis((0, kw), "r_kw")
    return te.compute((alpha, alpha, ci, co),
                      lambda eps, nu, i, o: te.sum(weight[o, i, r_kh, r_kw] * G[eps, r_kh]
                                                   * G[nu, r_kw], axis=[r_kh, r_kw]),
                      name="winograd_weight")


def rewrite(mod, conv: str):
    """``mod`` with every eligible conv2d as Winograd F(m x m, 3x3), m from ``conv``; ``mod``
    itself for the direct algorithm."""
    m = tile_size(conv)
    if not m:
        return mod
    import tvm
    from tvm import relax
    from tvm.relax.expr_functor import PyExprMutator, mutator

    op = tvm.ir.Op.get("relax.nn.conv2d")

    @mutator
    class _Winograd(PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if not call.op.same_as(op) or not eligible(call):
                return call
            a = call.attrs
            weight = self.builder_.emit_te(weight_transform, call.args[1], m,
                                           primfunc_name_hint="winograd_weight")
            return self.builder_.call_te(_winograd_nchw, call.args[0], weight, a.strides,
                                         a.padding, a.dilation, "float32", m,
                                         primfunc_name_hint=f"conv2d_winograd{m}")

    rewriter = _Winograd(mod)
    for gv, func in mod.functions_items():
        if isinstance(func, relax.Function):
            rewriter.builder_.update_func(gv, rewriter.visit_expr(func))
    return rewriter.builder_.get()


def _winograd_nchw(data, weight, strides, padding, dilation, out_dtype, m):
    """TOPI's NCHW Winograd with the weight pre-computed, output tile ``m``."""
    from tvm.topi.nn.conv2d import _conv2d_winograd_nchw_impl

    return _conv2d_winograd_nchw_impl(data, weight, strides, padding, dilation, out_dtype, m,
                                      pre_computed=True)
