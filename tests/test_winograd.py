"""Winograd F(2x2,3x3) and F(4x4,3x3) for stride-1 3x3 convolutions (``tcl tune --conv``): the
rewrite picks exactly those convolutions, folds the weight transform at compile time, and a real
network (the zoo's resnet18) compiled with it matches PyTorch within the tune check's
tolerance."""
from __future__ import annotations

import numpy as np
import pytest

from tcl.config import Paths, TclError


@pytest.fixture(scope="module")
def resnet18():
    import torch

    from tcl.tune.plan import resolve_instance

    torch.manual_seed(0)
    inst = resolve_instance(Paths.default(), "resnet18-b1-224")
    net, example = inst.module().eval(), inst.example()
    with torch.no_grad():
        reference = net(*example).numpy()
    return inst, net, example, reference


def _primfuncs(mod) -> list[str]:
    import tvm

    return [gv.name_hint for gv, f in mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc)]


def _called(mod) -> list[str]:
    """The PrimFuncs the network's main function calls, once per call."""
    import tvm
    from tvm import relax

    call_tir, names = tvm.ir.Op.get("relax.call_tir"), []
    relax.analysis.post_order_visit(mod["main"], lambda e: names.append(e.args[0].name_hint) if (
        isinstance(e, relax.Call) and e.op.same_as(call_tir)) else None)
    return names


@pytest.mark.parametrize("conv, m", [("winograd-2", 2), ("winograd-4", 4)])
def test_winograd_resnet18_matches_pytorch_within_the_tune_tolerance(resnet18, conv, m):
    """Every stride-1 3x3 convolution of resnet18 (4 shapes, 8 layers) becomes a Winograd
    kernel, the strided and 1x1 ones stay direct, no weight transform is left to run, and the
    compiled network's output matches PyTorch's within ``TOLERANCE``."""
    import tvm
    from tvm import relax

    from tcl.hosts import native_target
    from tcl.store.devices import make_target
    from tcl.tune import TOLERANCE
    from tcl.tune.layout import network_module

    inst, net, example, reference = resnet18
    target = make_target(native_target(1))
    mod = network_module(inst, net, example, "nchw", target, conv=conv)
    import torch

    names, calls = _primfuncs(mod), _called(mod)
    eligible = sum(isinstance(c, torch.nn.Conv2d) and c.kernel_size == (3, 3)
                   and c.stride == (1, 1) and c.groups == 1 for c in net.modules())
    assert eligible == 13   # resnet18: the 3x3 convolutions but the 3 that downsample
    assert sum(f"conv2d_winograd{m}" in n for n in calls) == eligible, calls
    assert any("conv2d" in n and "winograd" not in n for n in calls), calls   # strided, 1x1
    assert not any("winograd_weight" in n for n in names), names   # folded at compile time
    vm = relax.VirtualMachine(tvm.compile(mod, target=target), tvm.cpu())
    out = vm["main"](*[tvm.runtime.tensor(x.numpy()) for x in example])
    out = (out if hasattr(out, "numpy") else out[0]).numpy()
    np.testing.assert_allclose(out, reference, rtol=TOLERANCE["rtol"], atol=TOLERANCE["atol"])


def test_direct_leaves_the_module_as_it_was(resnet18):
    """The default algorithm changes nothing: the zoo's task ids (and its records) hold."""
    from tcl.tune.winograd import rewrite

    inst, net, example, _ = resnet18
    from tcl.zoo.extract import exported_module

    mod = exported_module(inst, net, example)
    assert rewrite(mod, "direct") is mod


def test_an_unknown_algorithm_is_refused_naming_the_choices():
    from tcl.tune.winograd import check_conv, tile_size

    with pytest.raises(TclError, match="conv 'winograd-3': expected one of direct, winograd-2, "
                                       "winograd-4"):
        check_conv("winograd-3")
    assert [tile_size(c) for c in ("direct", "winograd-2", "winograd-4")] == [0, 2, 4]
