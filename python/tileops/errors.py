"""The tileops error hierarchy in Python.

Every class derives from :class:`Error` and from the built-in exception a Python caller would
catch for the same fault, so ``except ValueError`` keeps working. The message is the C++ one: it
names the op, the manifest declaration or rule that was broken and the value received.
"""

from __future__ import annotations

import re


class Error(Exception):
    """Base of every tileops error."""


class SignatureError(Error, ValueError):
    """A call or a parameter breaks the op's manifest signature (shape, rule, range)."""


class DTypeError(SignatureError, TypeError):
    """A tensor's dtype breaks the manifest (also a TypeError)."""


class ArgumentTypeError(SignatureError, TypeError):
    """An argument is not of the declared kind (a non-tensor where a tensor is expected)."""


class DeviceError(SignatureError):
    """Tensors on a device the call does not accept, or on different devices."""


class OpNotAvailableError(Error, RuntimeError):
    """No implementation of the op serves the call's device."""


class DispatchError(Error, RuntimeError):
    """Kernel selection failed: nothing serves the call, or the choice is ambiguous."""


class UnknownTargetError(Error, ValueError):
    """A target named by the constructor or the process default is not registered."""


class AmbiguousTargetError(Error, RuntimeError):
    """Several registered detectors claim the call's device."""


class BackendError(Error, RuntimeError):
    """A backend registration is invalid."""


class ManifestError(Error, RuntimeError):
    """The manifest data disagrees with the code."""


class UsageError(Error, RuntimeError):
    """Misuse of the op API (last_call before any call, a CUDA runtime error, ...)."""


_BY_NAME: dict[str, type[Error]] = {
    c.__name__: c
    for c in (
        Error,
        SignatureError,
        OpNotAvailableError,
        DispatchError,
        UnknownTargetError,
        AmbiguousTargetError,
        BackendError,
        ManifestError,
        UsageError,
    )
}

_TAG = re.compile(r"tileops\.(\w+): (.*)", re.DOTALL)


def translate(exc: BaseException) -> Error | None:
    """The tileops error a RuntimeError raised by the extension carries, or None.

    The C++ side tags the message with the error class ("tileops.SignatureError: ..."), since
    the stable ABI passes exceptions as text only. A signature error about a dtype or a device
    becomes the matching subclass.
    """
    match = _TAG.search(str(exc))
    if match is None:
        return None
    cls = _BY_NAME.get(match.group(1), Error)
    message = match.group(2).split("\nException raised from", 1)[0].rstrip()
    if cls is SignatureError:
        lowered = message.lower()
        if "dtype" in lowered:
            cls = DTypeError
        elif "device" in lowered:
            cls = DeviceError
    return cls(message)
