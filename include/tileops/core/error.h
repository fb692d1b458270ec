// The error hierarchy of tileops. Every error the library raises derives from tileops::Error;
// messages name the op (where there is one), the declaration or rule that was broken, and the
// value received.
#pragma once

#include <stdexcept>
#include <string>

namespace tileops {

/// Base of every error the library throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A call, a construction parameter or a tensor breaks the op's manifest signature
/// (shape, dtype, rule, parameter type or range). Also bad use of the tensor API.
class SignatureError : public Error {
 public:
  using Error::Error;
};

/// The op has no implementation for the call's device, the selected target registers no builder
/// for the op, or a builder returned nothing callable.
class OpNotAvailableError : public Error {
 public:
  using Error::Error;
};

/// Kernel selection failed: no implementation serves the call (every reason is listed), the
/// selection is ambiguous, or an implementation table breaks its contracts.
class DispatchError : public Error {
 public:
  using Error::Error;
};

/// A target named by the constructor or the process default is not registered.
class UnknownTargetError : public Error {
 public:
  using Error::Error;
};

/// Several registered detectors claim the call's device.
class AmbiguousTargetError : public Error {
 public:
  using Error::Error;
};

/// A backend registration is invalid (duplicate kernel key, duplicate builder, failed plugin).
class BackendError : public Error {
 public:
  using Error::Error;
};

/// The manifest data is inconsistent with the code (e.g. a class registered under a name the
/// manifest lacks, delegate types that disagree with the composition).
class ManifestError : public Error {
 public:
  using Error::Error;
};

/// Misuse of the op API that is none of the above: last_call before any call, an unknown
/// stage in delegate_for, a sub-op completing a call it is not held for, a CUDA runtime error.
class UsageError : public Error {
 public:
  using Error::Error;
};

/// Memory for a tensor could not be allocated on its device (the CUDA allocator reported
/// cudaErrorMemoryAllocation). Nothing was allocated; the op that asked can be called again.
class OutOfMemoryError : public UsageError {
 public:
  using UsageError::UsageError;
};

}  // namespace tileops
