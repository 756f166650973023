"""fusetune's exceptions: one class per error code of the C++ library
(common/status.h), every one a fusetune.Error, itself a RuntimeError.

The message is the one the `fusetune` command prints after "fusetune: error: ",
"<code>: <what, and the file, node or tensor it concerns>". The errors a
caller's input causes (a bad argument, a missing file, a model that does not
parse, an unsupported op, a shape that does not fit) are ValueErrors too.
"""


class Error(RuntimeError):
    """A fusetune failure. `code` names its kind, as the message begins."""

    code = "error"


class InvalidArgumentError(Error, ValueError):
    """A bad argument or option."""

    code = "invalid argument"


class NotFoundError(Error, ValueError):
    """A file, input, job or record that does not exist."""

    code = "not found"


class ParseError(Error, ValueError):
    """A model or file that cannot be read (not ONNX, truncated)."""

    code = "parse error"


class UnsupportedError(Error, ValueError):
    """Valid input fusetune cannot handle: an op, a dtype."""

    code = "unsupported"


class ShapeMismatchError(Error, ValueError):
    """Shapes or dtypes that do not agree (an input of the wrong shape)."""

    code = "shape mismatch"


class IoError(Error):
    """The operating system refused a read or a write."""

    code = "i/o error"


class CorruptError(Error):
    """Stored data that fails its own checks: a corrupt tuning database."""

    code = "corrupt data"


class InternalError(Error):
    """A failure that is fusetune's fault."""

    code = "internal error"


class VerificationError(Error):
    """from_torch(): the compiled model's outputs differ from the module's."""

    code = "wrong"


_BY_CODE = {cls.code: cls for cls in (InvalidArgumentError, NotFoundError, ParseError,
                                      UnsupportedError, ShapeMismatchError, IoError,
                                      CorruptError, InternalError, VerificationError)}


def error_class(message):
    """The class of an error message "<code>: ..." (the C++ side raises through it)."""
    return _BY_CODE.get(message.split(":", 1)[0], Error)


def error(cls, what):
    """An exception of `cls` with the message form of the C++ side's."""
    return cls(f"{cls.code}: {what}")
