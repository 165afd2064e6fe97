"""ggml from Python: the only package that touches native code (through llama-cpp-python's libs).

Shapes and axes are numpy/PyTorch order everywhere (see :mod:`inference.native.tensor` for the
one place where ggml's reversed order is explained). Every native allocation has an owner with
``close()`` / ``with``: :class:`Backend`, :class:`WeightStore`, :class:`Graph`, :class:`GraphCache`.

Example — a linear layer, a LayerNorm and softmax attention over one clip::

    import numpy as np
    from inference.native import GraphCache, load_weights, open_backend, open_checkpoint

    with open_backend("auto", threads=None) as backend, open_checkpoint("model.safetensors") as ckpt:
        weights = load_weights(backend, ckpt, storage="f16")      # matrices f16, vectors f32
        ln_w = ckpt.numpy("ln.weight")                            # small tensors as f32 numpy
        heads, dim = 4, 256

        def build(g, frames):                                     # frames: the shape bucket
            x = g.input("x", (frames, dim))
            mask = g.input("mask", (frames, frames))              # additive, 0 or -inf
            h = g.linear(x, weights["proj.weight"], weights["proj.bias"])
            h = g.layer_norm(h, weights["ln.weight"], weights["ln.bias"], eps=1e-5)
            qkv = g.linear(h, weights["qkv.weight"])              # (frames, 3*dim)
            q, k, v = (g.permute(g.reshape(t, (frames, heads, dim // heads)), (1, 0, 2))
                       for t in g.split(qkv, -1, (dim, dim, dim)))  # each (heads, frames, hd)
            a = g.attention(q, k, v, mask)                        # (heads, frames, hd)
            g.output("y", g.reshape(g.permute(a, (1, 0, 2)), (frames, dim)))

        with GraphCache(backend, build) as graphs:
            frames = 64                                           # pad real lengths up to a bucket
            y = graphs.run(frames, x=np.zeros((frames, dim), np.float32),
                           mask=np.zeros((frames, frames), np.float32))["y"]
        weights.close()

Ops are methods of the builder ``g`` with numpy semantics (:mod:`inference.native.ops`), only those the engines
use; the thinker's own ops run inside libllama. ``describe()`` lists versions, CPU features and devices.
"""

from inference.native.backend import Backend, describe, list_devices, open_backend, physical_cores
from inference.native.bindings import GgmlApi, load_api
from inference.native.checkpoint import Checkpoint, TensorRecord, open_checkpoint
from inference.native.dtypes import GgmlType, StorageType
from inference.native.graph import Graph, GraphBudgetError, GraphCache
from inference.native.lib import GgmlLibraries, load_ggml_libraries
from inference.native.ops import GraphBuilder
from inference.native.tensor import Tensor
from inference.native.weights import WeightStore, load_weights

__all__ = [
    "Backend",
    "Checkpoint",
    "GgmlApi",
    "GgmlLibraries",
    "GgmlType",
    "Graph",
    "GraphBudgetError",
    "GraphBuilder",
    "GraphCache",
    "StorageType",
    "Tensor",
    "TensorRecord",
    "WeightStore",
    "describe",
    "list_devices",
    "load_api",
    "load_ggml_libraries",
    "load_weights",
    "open_backend",
    "open_checkpoint",
    "physical_cores",
]
