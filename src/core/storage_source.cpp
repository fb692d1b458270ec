// The thread-scoped storage source (storage_source.h).
#include "tileops/core/storage_source.h"

namespace tileops {

namespace {

struct SourceSlot {
  StorageSource source = nullptr;
  void* context = nullptr;
};

thread_local SourceSlot t_slot;

}  // namespace

ScopedStorageSource::ScopedStorageSource(StorageSource source, void* context) noexcept
    : previous_source_(t_slot.source), previous_context_(t_slot.context) {
  t_slot = {source, context};
}

ScopedStorageSource::~ScopedStorageSource() {
  t_slot = {previous_source_, previous_context_};
}

namespace detail {

StorageSource current_storage_source(void*& context) noexcept {
  if (t_slot.source != nullptr) context = t_slot.context;
  return t_slot.source;
}

}  // namespace detail

}  // namespace tileops
