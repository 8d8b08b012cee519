"""benchmarks/layer_table.py: TVM's kernels and onnxruntime's nodes fall into the same layers."""
from __future__ import annotations

import pytest

from conftest import benchmark_module


@pytest.fixture(scope="module")
def lt():
    with benchmark_module("layer_table") as module:
        yield module


def test_a_blocked_tvm_convolution_and_onnxruntimes_are_one_layer(lt):
    # resnet18's layer1 second conv, residual add fused: NCHW16c in TVM, NCHW in onnxruntime
    tvm = lt.tvm_layer("fused_conv2d_NCHWc_add1_add2_relu1",
                       [[1, 4, 56, 56, 16], [4, 4, 3, 3, 16, 16], [1, 4, 1, 1, 16],
                        [1, 4, 56, 56, 16], [1, 4, 56, 56, 16]])
    ort = lt.ort_layer("Conv", [[1, 64, 56, 56], [64, 64, 3, 3], [1, 64, 56, 56]],
                       [[1, 64, 56, 56]])
    assert tvm == ort == "conv 3x3/1 64->64 56x56"
    # the same conv without the residual is the same layer (the two place the add differently)
    assert lt.tvm_layer("fused_conv2d_NCHWc_add1_relu1",
                        [[1, 4, 56, 56, 16], [4, 4, 3, 3, 16, 16], [1, 4, 1, 1, 16],
                         [1, 4, 56, 56, 16]]) == "conv 3x3/1 64->64 56x56"
    # the strided downsample is another
    assert lt.ort_layer("Conv", [[1, 64, 56, 56], [128, 64, 1, 1]], [[1, 128, 28, 28]]) == \
        lt.tvm_layer("fused_conv2d_NCHWc1_add3",
                     [[1, 4, 56, 56, 16], [8, 4, 1, 1, 16, 16], [1, 8, 1, 1, 16],
                      [1, 8, 28, 28, 16]]) == "conv 1x1/2 64->128 28x28"
    assert lt.tvm_layer("fused_conv2d_add_relu", [[1, 3, 224, 224], [64, 3, 7, 7],
                                                  [1, 64, 1, 1], [1, 64, 112, 112]]) == \
        "conv 7x7/2 3->64 112x112"


def test_matmuls_and_other_kinds_match_across_fusions(lt):
    assert lt.tvm_layer("fused_matmul_add2", [[128, 128], [128, 384], [384], [128, 384]]) == \
        lt.ort_layer("Gemm", [[128, 128], [384]], [[128, 384]]) == "matmul 128x128x384"
    assert lt.tvm_layer("matmul1", [[2, 128, 64], [2, 64, 128], [2, 128, 128]]) == \
        lt.ort_layer("FusedMatMul", [[1, 2, 128, 64], [1, 2, 64, 128]], [[1, 2, 128, 128]])
    assert lt.tvm_layer("fused_reshape11_gelu_reshape12", [[128, 512], [128, 512]]) == "gelu"
    assert lt.ort_layer("SkipLayerNormalization", [[1, 128, 128]], [[1, 128, 128]]) == \
        lt.tvm_layer("layer_norm", [[1, 128, 128], [128], [128], [1, 128, 128]]) == "layer norm"
    assert lt.tvm_layer("te_layout_transform15", [[1, 64, 56, 56], [1, 4, 56, 56, 16]]) == \
        lt.ort_layer("ReorderOutput", [[1, 512, 7, 7]], [[1, 512, 7, 7]]) == "layout transform"
    assert lt.tvm_layer("fused_reshape1_add1", [[128, 128], [1, 128, 128]]) == "elementwise"
    assert lt.tvm_layer("fused_reshape9_transpose3_reshape10", [[2, 128, 64], [128, 128]]) == \
        lt.ort_layer("Transpose", [[1, 2, 128, 64]], [[1, 128, 2, 64]]) == "data movement"
    assert lt.tvm_layer("mean", [[1, 32, 7, 7, 16], [1, 32, 1, 1, 16]]) == \
        lt.ort_layer("ReduceMean", [[1, 512, 7, 7], [2]], [[1, 512, 1, 1]]) == "global avg pool"


def test_the_table_splits_end_to_end_time_into_layers_and_the_rest(lt):
    row = {"network": "n", "run": "r", "model": "m", "layout": "nchw", "device": "d",
           "threads": 1, "host": None, "repeats": 3, "tasks": ["fused_matmul_add2"],
           "tvm_calls": [["fused_matmul_add2", [[128, 128], [128, 384], [384], [128, 384]], 1.0],
                         ["fused_reshape1_add1", [[128, 128], [1, 128, 128]], 0.5],
                         ["vm.builtin.alloc_tensor", [], 0.1]],
           "tvm_ms": 2.0, "ort_nodes": [["Gemm", [[128, 128], [384]], [[128, 384]], 0.5]],
           "ort_ms": 0.7, "ort_profiled_ms": 0.8}
    text = lt.format_table(row)
    assert "| matmul 128x128x384 | 1 | 1.000 | 1 | 0.500 | +0.500 | 2.00 |" in text
    # outside the tuned tasks: the untuned kernel 0.5 + builtins 0.1 + VM overhead 0.4 of 2.0
    assert "50.0% of end to end outside the tuned tasks" in text
