"""Models as the C++ library takes them: a path. A model given as bytes or as
an onnx.ModelProto is written to a temporary file, which lives as long as
whatever holds the returned holder (an executable compiles other sizes from
its file at run time)."""

import os
import tempfile

from ._errors import InvalidArgumentError, error


def model_file(model):
    """(path, holder): a path as itself (holder None), else a temporary file
    that is removed when the holder is."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model), None
    if isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
    elif hasattr(model, "SerializeToString"):  # onnx.ModelProto, without importing onnx
        data = model.SerializeToString()
    else:
        raise error(InvalidArgumentError,
                    f"model must be a path, bytes or an onnx.ModelProto, not {type(model).__name__}")
    holder = tempfile.TemporaryDirectory(prefix="fusetune-")
    path = os.path.join(holder.name, "model.onnx")
    with open(path, "wb") as f:
        f.write(data)
    return path, holder
