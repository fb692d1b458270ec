// A thread-scoped source of memory for Storage::allocate. A host framework that calls tileops
// (the PyTorch extension) installs one around a call so that the outputs and workspaces the
// call allocates come from the framework's allocator (its caching allocator, visible to its
// memory accounting and safe under its CUDA-graph capture) instead of tileops' own pools.
#pragma once

#include <cstddef>

#include "tileops/core/device.h"
#include "tileops/core/tensor.h"

namespace tileops {

/// Returns storage of at least `request.nbytes` bytes on `request.device` (typically
/// Storage::borrow over the framework's memory, releasing it in on_release). A request that
/// names a dtype and sizes is a tensor's storage: the source may allocate a framework tensor of
/// that type and shape. May throw; the allocation then fails.
using StorageSource = StoragePtr (*)(const StorageRequest& request, void* context);

/// While alive, Storage::allocate on this thread takes its memory from `source` (nested scopes
/// stack; the previous source is restored on destruction). Other threads are unaffected.
class ScopedStorageSource {
 public:
  ScopedStorageSource(StorageSource source, void* context) noexcept;
  ~ScopedStorageSource();
  ScopedStorageSource(const ScopedStorageSource&) = delete;
  ScopedStorageSource& operator=(const ScopedStorageSource&) = delete;

 private:
  StorageSource previous_source_;
  void* previous_context_;
};

namespace detail {
/// The source installed on this thread, or nullptr (then `context` is untouched).
StorageSource current_storage_source(void*& context) noexcept;
}  // namespace detail

}  // namespace tileops
