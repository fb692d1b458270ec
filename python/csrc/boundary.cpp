// The generic boundary entry: torch tensors in and out without copies, outputs from torch's
// allocator, tileops on torch's current CUDA stream, tileops errors tagged with their class.
// The instances it runs are in instances.cpp, the calls of the Python composites in composite.cpp.
#include "boundary.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <utility>

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/core/ScalarType.h>

#include "tileops/base/op.h"
#include "tileops/base/op_class.h"
#include "tileops/core/cuda.h"
#include "tileops/core/error.h"
#include "tileops/core/storage_source.h"
#include "tileops/core/tensor.h"

#include "interop.h"

namespace tileops::torch_ext {

namespace {

using torch::headeronly::ScalarType;
namespace st = torch::stable;

// ---- dtypes and devices -----------------------------------------------------------------------

DType to_dtype(ScalarType s) {
  switch (s) {
    case ScalarType::Float:
      return DType::float32;
    case ScalarType::Double:
      return DType::float64;
    case ScalarType::Half:
      return DType::float16;
    case ScalarType::BFloat16:
      return DType::bfloat16;
    case ScalarType::Float8_e4m3fn:
      return DType::float8_e4m3fn;
    case ScalarType::Float8_e5m2:
      return DType::float8_e5m2;
    case ScalarType::Char:
      return DType::int8;
    case ScalarType::Short:
      return DType::int16;
    case ScalarType::Int:
      return DType::int32;
    case ScalarType::Long:
      return DType::int64;
    case ScalarType::Byte:
      return DType::uint8;
    case ScalarType::Bool:
      return DType::bool_;
    default:
      throw SignatureError("tileops: torch dtype " + std::string(torch::headeronly::toString(s)) +
                           " has no tileops dtype");
  }
}

ScalarType to_scalar(DType d) {
  switch (d) {
    case DType::float32:
      return ScalarType::Float;
    case DType::float64:
      return ScalarType::Double;
    case DType::float16:
      return ScalarType::Half;
    case DType::bfloat16:
      return ScalarType::BFloat16;
    case DType::float8_e4m3fn:
      return ScalarType::Float8_e4m3fn;
    case DType::float8_e5m2:
      return ScalarType::Float8_e5m2;
    case DType::int8:
      return ScalarType::Char;
    case DType::int16:
      return ScalarType::Short;
    case DType::int32:
      return ScalarType::Int;
    case DType::int64:
      return ScalarType::Long;
    case DType::uint8:
      return ScalarType::Byte;
    case DType::bool_:
      return ScalarType::Bool;
    default:  // a tileops dtype this mapping predates
      throw SignatureError("tileops: dtype " + std::string(dtype_name(d)) +
                           " has no torch mapping in the extension");
  }
}

Device to_device(const Tensor& t) {
  if (t.is_cuda()) return Device::cuda(t.get_device_index());
  if (t.is_cpu()) return Device::cpu();
  throw SignatureError("tileops: tensors must be on the CPU or a CUDA device");
}

st::Device to_torch_device(Device d) {
  return d.is_cpu() ? st::Device(torch::headeronly::DeviceType::CPU)
                    : st::Device(torch::headeronly::DeviceType::CUDA,
                                 static_cast<torch::stable::accelerator::DeviceIndex>(d.index));
}

// ---- outputs from torch's allocator -------------------------------------------------------------

// tileops' CPU kernels may touch whole 64-byte lines (as tileops' own CPU allocator allows).
constexpr std::size_t kLine = 64;

struct Allocation {
  void* data;
  Tensor tensor;  // owns the memory: typed and shaped (a CUDA tensor's storage) or uint8 bytes
  bool typed;
};

struct Allocations {
  std::vector<Allocation> blocks;
};

// A tensor's storage is allocated as the torch tensor it will be returned as (one torch call,
// and none to return it), unless it is CPU memory whose size is not whole lines; that and raw
// bytes as a uint8 block, padded to whole lines on the CPU.
StoragePtr torch_storage(const StorageRequest& request, void* context) {
  auto* allocations = static_cast<Allocations*>(context);
  const bool typed =
      request.dtype.has_value() && (request.device.is_cuda() || request.nbytes % kLine == 0);
  Tensor block = [&] {
    if (typed) {
      return st::empty(std::vector<std::int64_t>(request.sizes.begin(), request.sizes.end()),
                       to_scalar(*request.dtype), std::nullopt, to_torch_device(request.device));
    }
    const std::size_t n =
        request.device.is_cpu() ? (request.nbytes + kLine - 1) / kLine * kLine : request.nbytes;
    const std::vector<std::int64_t> size{static_cast<std::int64_t>(n)};
    return st::empty(size, ScalarType::Byte, std::nullopt, to_torch_device(request.device));
  }();
  void* data = block.data_ptr();
  allocations->blocks.push_back({data, block, typed});
  return Storage::borrow(data, request.nbytes, request.device, [keep = std::move(block)] {});
}

Tensor call_dispatcher(const char* op, const char* overload, StableIValue* stack) {
  // Checked by hand: the checking macro's name differs between torch releases.
  if (torch_call_dispatcher(op, overload, stack, TORCH_ABI_VERSION) != AOTI_TORCH_SUCCESS) {
    throw std::runtime_error(std::string("tileops: torch call of ") + op + " failed");
  }
  return st::detail::to<Tensor>(stack[0]);
}

bool same_layout(const tileops::Tensor& y, const Tensor& t) {
  const auto sizes = t.sizes();
  const auto strides = t.strides();
  return y.offset() == 0 &&
         std::equal(sizes.begin(), sizes.end(), y.sizes().begin(), y.sizes().end()) &&
         std::equal(strides.begin(), strides.end(), y.strides().begin(), y.strides().end());
}

// The torch tensor over a tileops output: the tensor it was allocated as, a typed strided view
// of the block it was allocated in, or (memory tileops did not take from torch) a copy into a
// new torch tensor.
Tensor to_torch(const tileops::Tensor& y, const Allocations& allocations) {
  const ScalarType scalar = to_scalar(y.dtype());
  const std::vector<std::int64_t> sizes = y.sizes();
  const std::vector<std::int64_t> strides = y.strides();
  const void* base = y.storage() ? y.storage()->data() : nullptr;
  for (const auto& [data, block, typed] : allocations.blocks) {
    if (data == nullptr || data != base) continue;
    if (typed && block.scalar_type() == scalar && same_layout(y, block)) return block;
    Tensor typed_block = block;
    if (block.scalar_type() != scalar) {
      std::array<StableIValue, 2> as_type{st::detail::from(block), st::detail::from(scalar)};
      typed_block = call_dispatcher("aten::view", "dtype", as_type.data());
    }
    std::array<StableIValue, 4> view{
        st::detail::from(typed_block),
        st::detail::from(torch::headeronly::IntHeaderOnlyArrayRef(sizes)),
        st::detail::from(torch::headeronly::IntHeaderOnlyArrayRef(strides)),
        st::detail::from(std::optional<std::int64_t>(y.offset()))};
    return call_dispatcher("aten::as_strided", "", view.data());
  }
  Tensor fresh = st::empty(sizes, scalar, std::nullopt, to_torch_device(y.device()));
  if (y.numel() > 0) wrap(fresh).copy_(y);
  return fresh;
}

// ---- streams ------------------------------------------------------------------------------------

// Looked up at run time so that the extension loads against a torch without CUDA. Python loads
// torch's libraries with RTLD_LOCAL, so the symbol is not in the global scope: it is looked up in
// libtorch_cuda.so itself, which `import torch` has loaded when torch has CUDA.
using CurrentStreamFn = std::int32_t (*)(std::int32_t, void**);

CurrentStreamFn find_current_stream_fn() {
  const char* symbol = "aoti_torch_get_current_cuda_stream";
  if (void* fn = dlsym(RTLD_DEFAULT, symbol)) return reinterpret_cast<CurrentStreamFn>(fn);
  void* lib = dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD);
  return lib == nullptr ? nullptr : reinterpret_cast<CurrentStreamFn>(dlsym(lib, symbol));
}

void* torch_current_stream(int device) {
  static const CurrentStreamFn fn = find_current_stream_fn();
  // Never run silently on another stream than torch's: under CUDA-graph capture the kernels would
  // run at once instead of joining the graph.
  if (fn == nullptr) {
    throw UsageError(
        "tileops: cannot find torch's aoti_torch_get_current_cuda_stream, so cannot run "
        "on torch's current CUDA stream");
  }
  void* stream = nullptr;
  if (fn(device, &stream) != 0)
    throw UsageError("tileops: cannot read torch's current CUDA stream");
  return stream;
}

}  // namespace

// ---- errors -------------------------------------------------------------------------------------

void rethrow_tagged() {
  const auto tagged = [](const char* cls, const std::exception& e) {
    return std::runtime_error(std::string("tileops.") + cls + ": " + e.what());
  };
  try {
    throw;
  } catch (const SignatureError& e) {
    throw tagged("SignatureError", e);
  } catch (const OpNotAvailableError& e) {
    throw tagged("OpNotAvailableError", e);
  } catch (const DispatchError& e) {
    throw tagged("DispatchError", e);
  } catch (const UnknownTargetError& e) {
    throw tagged("UnknownTargetError", e);
  } catch (const AmbiguousTargetError& e) {
    throw tagged("AmbiguousTargetError", e);
  } catch (const BackendError& e) {
    throw tagged("BackendError", e);
  } catch (const ManifestError& e) {
    throw tagged("ManifestError", e);
  } catch (const UsageError& e) {
    throw tagged("UsageError", e);
  } catch (const Error& e) {
    throw tagged("Error", e);
  }
}

// A view of the torch tensor, no copy; the torch handle keeps the memory alive.
tileops::Tensor wrap(const Tensor& t) {
  const auto sizes = t.sizes();
  const auto strides = t.strides();
  return tileops::Tensor::from_blob(t.data_ptr(), Sizes(sizes.begin(), sizes.end()),
                                    to_dtype(t.scalar_type()), to_device(t),
                                    Sizes(strides.begin(), strides.end()), [keep = t] {});
}

std::vector<Tensor> run_on_torch(const Op& op, std::span<const tileops::Tensor> inputs,
                                 const std::optional<Tensor>& out, bool out_returned,
                                 const std::function<std::vector<tileops::Tensor>()>& body) {
  const auto present = std::find_if(inputs.begin(), inputs.end(),
                                    [](const tileops::Tensor& t) { return t.defined(); });
  // Torch's stream for this call on this thread only: threads on other streams do not race.
  std::optional<ScopedCudaStream> stream;
  if (present != inputs.end() && present->device().is_cuda()) {
    const int device = present->device().index;
    stream.emplace(device, torch_current_stream(device));
  }
  Allocations allocations;
  std::vector<tileops::Tensor> results;
  {
    const ScopedStorageSource source(&torch_storage, &allocations);
    results = body();
  }
  std::vector<Tensor> returned;
  returned.reserve(results.size());
  const auto& decls = op.schema().outputs;
  for (std::size_t i = 0; i < results.size() && i < decls.size(); ++i) {
    if (out && decls[i].buffer_out) {  // the caller's buffer
      if (out_returned) returned.push_back(*out);
      continue;
    }
    returned.push_back(to_torch(results[i], allocations));
  }
  return returned;
}

std::vector<Tensor> run_boundary(const std::string& key, std::vector<std::optional<Tensor>> inputs,
                                 std::optional<Tensor> out, std::size_t n_returns) {
  try {
    const std::shared_ptr<Op> op = find(key);
    std::vector<tileops::Tensor> ins;
    ins.reserve(inputs.size());
    for (const auto& t : inputs) ins.push_back(t ? wrap(*t) : tileops::Tensor());
    std::vector<tileops::Tensor> outs;
    for (const auto& o : op->schema().outputs) {
      if (o.buffer_out) outs.push_back(out ? wrap(*out) : tileops::Tensor());
    }
    std::vector<Tensor> returned =
        run_on_torch(*op, ins, out, false, [&] { return op->call(ins, outs); });
    if (returned.size() != n_returns) {
      throw UsageError("tileops: " + std::string(op->name()) + " returned " +
                       std::to_string(returned.size()) + " tensors, the schema " +
                       std::to_string(n_returns));
    }
    return returned;
  } catch (const Error&) {
    rethrow_tagged();
  }
}

std::vector<Tensor> call_native(const std::string& key,
                                const std::vector<std::optional<Tensor>>& inputs) {
  try {
    const std::shared_ptr<Op> op = find(key);
    std::vector<tileops::Tensor> ins;
    std::optional<Device> device;
    for (const auto& t : inputs) {
      if (!t) {
        ins.emplace_back();
        continue;
      }
      const tileops::Tensor view = wrap(*t);
      tileops::Tensor owned = tileops::Tensor::empty(view.sizes(), view.dtype(), view.device());
      owned.copy_(view);
      ins.push_back(owned);
      if (!device) device = view.device();
    }
    const bool cuda = device && device->is_cuda() && cuda_available();
    std::optional<ScopedCudaStream> stream;
    if (cuda) stream.emplace(device->index, nullptr);  // tileops' own default: the legacy stream
    const std::vector<tileops::Tensor> results = op->call(ins);
    std::vector<Tensor> out;
    const Allocations none;
    for (const auto& r : results) out.push_back(to_torch(r, none));
    // Then the inputs the call wrote (the copies it wrote into), in manifest order.
    const auto& decls = op->schema().inputs;
    for (std::size_t i = 0; i < ins.size() && i < decls.size(); ++i) {
      if (decls[i].mutated && ins[i].defined()) out.push_back(to_torch(ins[i], none));
    }
    if (cuda) cuda_synchronize(device->index);
    return out;
  } catch (const Error&) {
    rethrow_tagged();
  }
}

}  // namespace tileops::torch_ext
