"""Writes inference/native/dynamic_quantize_matmul.onnx, the one-node model Captioneer's int8 products run.

``y (m, n) = x (m, k) @ (w (k, n) * w_scale (n))`` with ``x`` quantized per call to u8 (ONNX Runtime's
com.microsoft ``DynamicQuantizeMatMul``); every dimension is dynamic. Needs the ``onnx`` package (in the
reference extras):  python tests/native/make_int8_product_model.py [--output PATH]
"""

from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_OUTPUT = Path(__file__).resolve().parents[2] / "inference" / "native" / "dynamic_quantize_matmul.onnx"


def build_model_bytes() -> bytes:
    from onnx import TensorProto, checker, helper

    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["m", "k"]),
        helper.make_tensor_value_info("w", TensorProto.INT8, ["k", "n"]),
        helper.make_tensor_value_info("w_scale", TensorProto.FLOAT, ["n"]),
    ]
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", "n"])
    node = helper.make_node("DynamicQuantizeMatMul", ["x", "w", "w_scale"], ["y"], domain="com.microsoft")
    graph = helper.make_graph([node], "captioneer_int8_product", inputs, [output])
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
        producer_name="captioneer",
    )
    model.ir_version = 8  # readable by every ONNX Runtime Captioneer supports
    checker.check_model(model)
    return model.SerializeToString()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args()
    args.output.write_bytes(build_model_bytes())
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
