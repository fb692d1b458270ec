// The NCCL transport of expert parallelism (tileops/ops/moe_nccl.h; why point-to-point and how
// failures are bounded: docs/design/expert-parallel.md). The communicator is non-blocking, so no
// NCCL call can hang the host: every call is followed by a wait that polls NCCL's asynchronous
// error state and the stream against the deadline, and aborts the communicator on an error or a
// timeout. After that the transport stays failed and every later call raises at once.
#include "tileops/ops/moe_nccl.h"

#include <fmt/format.h>

#include <cstring>
#include <thread>

#include "tileops/core/cuda.h"

#ifndef TILEOPS_WITH_NCCL
#define TILEOPS_WITH_NCCL 0
#endif
#if TILEOPS_WITH_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace tileops {

bool nccl_available() noexcept {
  return TILEOPS_WITH_NCCL != 0;
}

#if !TILEOPS_WITH_NCCL

namespace {

[[noreturn]] void no_nccl(const char* what) {
  throw OpNotAvailableError(fmt::format(
      "{}: tileops was built without NCCL (configure with CUDA and NCCL, TILEOPS_NCCL=ON)", what));
}

}  // namespace

NcclUniqueId nccl_unique_id() {
  no_nccl("nccl_unique_id");
}

std::shared_ptr<ExpertParallelTransport> make_nccl_transport(const NcclUniqueId&,
                                                             const NcclTransportOptions&) {
  no_nccl("make_nccl_transport");
}

#else

namespace {

std::string nccl_text(ncclResult_t result) {
  return fmt::format("{} ({})", ncclGetErrorString(result), static_cast<int>(result));
}

/// Makes `device` current for the scope (NCCL and the CUDA runtime use the current device).
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

class NcclTransport final : public ExpertParallelTransport {
 public:
  NcclTransport(const NcclUniqueId& id, const NcclTransportOptions& options) : options_(options) {
    static_assert(sizeof(ncclUniqueId) == sizeof(NcclUniqueId::bytes));
    ncclUniqueId raw;
    std::memcpy(&raw, id.bytes.data(), sizeof(raw));
    const DeviceScope scope(options_.device);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const auto deadline = Clock::now() + options_.timeout;
    check(ncclCommInitRankConfig(&comm_, static_cast<int>(options_.world_size), raw,
                                 static_cast<int>(options_.rank), &config),
          "ncclCommInitRankConfig", deadline);
    settle("connecting", deadline);
  }

  ~NcclTransport() override {
    if (comm_ == nullptr) return;
    // A failed communicator was aborted already; a healthy one is finalized (flushing its work),
    // bounded like any collective, and aborted if that does not finish.
    try {
      const DeviceScope scope(options_.device);
      if (failed_.empty()) {
        const auto deadline = Clock::now() + options_.timeout;
        check(ncclCommFinalize(comm_), "ncclCommFinalize", deadline);
        settle("finalizing", deadline);
        ncclCommDestroy(comm_);
        return;
      }
    } catch (...) {  // fail() aborted the communicator; a destructor must not throw
      return;
    }
    if (!aborted_) ncclCommAbort(comm_);
  }

  std::string name() const override {
    return fmt::format("nccl (rank {} of {}, cuda:{})", options_.rank, options_.world_size,
                       options_.device);
  }
  std::int64_t rank() const override { return options_.rank; }
  std::int64_t world_size() const override { return options_.world_size; }
  Device device() const override { return Device::cuda(options_.device); }

  std::vector<std::int64_t> all_gather(std::span<const std::int64_t> mine) override {
    const DeviceScope scope(options_.device);
    const Tensor send = to_device(mine);
    const Tensor recv = Tensor::empty(
        {static_cast<std::int64_t>(mine.size()) * options_.world_size}, DType::int64, device());
    const auto deadline = begin("all_gather");
    check(ncclAllGather(send.data_ptr(), recv.data_ptr(), mine.size(), ncclInt64, comm_,
                        cuda_stream()),
          "ncclAllGather", deadline);
    finish("all_gather", deadline);
    return to_host(recv);
  }

  std::vector<std::int64_t> exchange_counts(std::span<const std::int64_t> send_counts) override {
    expect_peers(send_counts.size(), "exchange_counts");
    const DeviceScope scope(options_.device);
    const Tensor send = to_device(send_counts);
    const Tensor recv = Tensor::empty({options_.world_size}, DType::int64, device());
    const auto deadline = begin("exchange_counts");
    group(deadline, [&] {
      for (int p = 0; p < options_.world_size; ++p) {
        check(ncclSend(send.data<std::int64_t>() + p, 1, ncclInt64, p, comm_, cuda_stream()),
              "ncclSend", deadline);
        check(ncclRecv(recv.data<std::int64_t>() + p, 1, ncclInt64, p, comm_, cuda_stream()),
              "ncclRecv", deadline);
      }
    });
    finish("exchange_counts", deadline);
    return to_host(recv);
  }

  void all_to_all(std::span<const std::byte> send, std::span<const std::int64_t> send_bytes,
                  std::span<std::byte> recv, std::span<const std::int64_t> recv_bytes) override {
    expect_peers(send_bytes.size(), "all_to_all");
    expect_peers(recv_bytes.size(), "all_to_all");
    const DeviceScope scope(options_.device);
    const auto deadline = begin("all_to_all");
    std::size_t send_at = 0, recv_at = 0;
    group(deadline, [&] {
      for (int p = 0; p < options_.world_size; ++p) {
        const auto out = static_cast<std::size_t>(send_bytes[p]);
        const auto in = static_cast<std::size_t>(recv_bytes[p]);
        if (send_at + out > send.size() || recv_at + in > recv.size()) {
          throw UsageError(fmt::format(
              "NcclTransport::all_to_all: the byte counts exceed the buffers ({} + {} of {} to "
              "send, {} + {} of {} to receive, peer {})",
              send_at, out, send.size(), recv_at, in, recv.size(), p));
        }
        if (out > 0) {
          check(ncclSend(send.data() + send_at, out, ncclUint8, p, comm_, cuda_stream()),
                "ncclSend", deadline);
        }
        if (in > 0) {
          check(ncclRecv(recv.data() + recv_at, in, ncclUint8, p, comm_, cuda_stream()), "ncclRecv",
                deadline);
        }
        send_at += out;
        recv_at += in;
      }
    });
    finish("all_to_all", deadline);
  }

 private:
  using Clock = std::chrono::steady_clock;

  cudaStream_t cuda_stream() const {
    return static_cast<cudaStream_t>(cuda_current_stream(options_.device));
  }

  void expect_peers(std::size_t n, const char* what) const {
    if (static_cast<std::int64_t>(n) != options_.world_size) {
      throw UsageError(fmt::format("NcclTransport::{}: {} counts for a world of {}", what, n,
                                   options_.world_size));
    }
  }

  Tensor to_device(std::span<const std::int64_t> values) const {
    Tensor host = Tensor::empty({static_cast<std::int64_t>(values.size())}, DType::int64);
    if (!values.empty()) std::memcpy(host.data_ptr(), values.data(), values.size_bytes());
    return host.to(device());
  }

  static std::vector<std::int64_t> to_host(const Tensor& t) {
    const Tensor host = t.to(Device::cpu());
    const auto* v = host.data<std::int64_t>();
    return {v, v + host.numel()};
  }

  /// Raises at once on a failed transport; else the deadline of a new collective.
  Clock::time_point begin(const char* what) const {
    if (!failed_.empty()) {
      throw ExpertParallelCommError(
          fmt::format("{}: {}: the group failed earlier: {}", name(), what, failed_));
    }
    return Clock::now() + options_.timeout;
  }

  /// ncclGroupStart, the calls, ncclGroupEnd (which may return in progress: settled after).
  template <class Calls>
  void group(Clock::time_point deadline, Calls&& calls) {
    check(ncclGroupStart(), "ncclGroupStart", deadline);
    try {
      calls();
    } catch (...) {
      ncclGroupEnd();
      throw;
    }
    check(ncclGroupEnd(), "ncclGroupEnd", deadline);
  }

  /// An NCCL call's result: in progress is settled (a non-blocking communicator), an error fails
  /// the group.
  void check(ncclResult_t result, const char* call, Clock::time_point deadline) {
    if (result == ncclSuccess) return;
    if (result == ncclInProgress) {
      settle(call, deadline);
      return;
    }
    fail(fmt::format("{} failed: {}{}", call, nccl_text(result), last_error()));
  }

  /// Waits until the communicator has no call in progress, failing on an error or the deadline.
  void settle(const char* what, Clock::time_point deadline) {
    for (;;) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t query = ncclCommGetAsyncError(comm_, &state);
      if (query != ncclSuccess)
        fail(fmt::format("{}: ncclCommGetAsyncError failed: {}", what, nccl_text(query)));
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) {
        fail(fmt::format("{}: {}{}", what, nccl_text(state), last_error()));
      }
      wait_or_fail(what, deadline);
    }
  }

  /// Waits for the collective on the stream to complete, watching NCCL's error state.
  void finish(const char* what, Clock::time_point deadline) {
    for (;;) {
      const cudaError_t done = cudaStreamQuery(cuda_stream());
      if (done == cudaSuccess) return;
      if (done != cudaErrorNotReady) {
        fail(fmt::format("{}: CUDA error {} ({}) on the stream", what, static_cast<int>(done),
                         cudaGetErrorString(done)));
      }
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) {
        fail(fmt::format("{}: {}{}", what, nccl_text(state), last_error()));
      }
      wait_or_fail(what, deadline);
    }
  }

  void wait_or_fail(const char* what, Clock::time_point deadline) {
    if (Clock::now() > deadline) {
      fail(fmt::format("{} did not complete within {} ms (a peer failed or never arrived)", what,
                       options_.timeout.count()));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }

  std::string last_error() const {
    const char* text = comm_ != nullptr ? ncclGetLastError(comm_) : nullptr;
    return text != nullptr && *text != '\0' ? fmt::format(" ({})", text) : std::string();
  }

  /// Aborts the communicator (which ends its kernels) and raises; the transport stays failed.
  [[noreturn]] void fail(const std::string& reason) {
    failed_ = reason;
    if (comm_ != nullptr && !aborted_) {
      aborted_ = true;
      ncclCommAbort(comm_);
    }
    throw ExpertParallelCommError(fmt::format("{}: {}", name(), reason));
  }

  NcclTransportOptions options_;
  ncclComm_t comm_ = nullptr;
  std::string failed_;
  bool aborted_ = false;
};

}  // namespace

NcclUniqueId nccl_unique_id() {
  ncclUniqueId raw;
  const ncclResult_t result = ncclGetUniqueId(&raw);
  if (result != ncclSuccess) {
    throw ExpertParallelCommError("ncclGetUniqueId failed: " + nccl_text(result));
  }
  NcclUniqueId id;
  std::memcpy(id.bytes.data(), &raw, sizeof(raw));
  return id;
}

std::shared_ptr<ExpertParallelTransport> make_nccl_transport(const NcclUniqueId& id,
                                                             const NcclTransportOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    throw UsageError(fmt::format("make_nccl_transport: rank {} of world size {} is out of range",
                                 options.rank, options.world_size));
  }
  if (options.device < 0 || options.device >= cuda_device_count()) {
    throw UsageError(fmt::format("make_nccl_transport: cuda:{} does not exist ({} devices)",
                                 options.device, cuda_device_count()));
  }
  if (options.timeout.count() <= 0) throw UsageError("make_nccl_transport: timeout must be > 0");
  return std::make_shared<NcclTransport>(id, options);
}

#endif

}  // namespace tileops
