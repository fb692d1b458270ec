// The launcher side of the NCCL transport (tileops/ops/moe_nccl.h): the unique id as text, the
// torchrun-style variables, and the id file through which rank 0 hands its id to the other ranks.
// The id must come from a process that stays alive until every rank has connected (NCCL's
// bootstrap root runs in the process that created it), which is why rank 0 creates it and the
// launcher only names the file (docs/design/expert-parallel.md).
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tileops/core/cuda.h"
#include "tileops/ops/moe_nccl.h"

namespace tileops {

std::string NcclUniqueId::hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  text.reserve(bytes.size() * 2);
  for (const std::byte b : bytes) {
    const auto v = std::to_integer<unsigned>(b);
    text += kDigits[v >> 4];
    text += kDigits[v & 15];
  }
  return text;
}

NcclUniqueId NcclUniqueId::from_hex(std::string_view text) {
  NcclUniqueId id;
  const auto digit = [&](char c) -> unsigned {
    if (c >= '0' && c <= '9') return static_cast<unsigned>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<unsigned>(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return static_cast<unsigned>(c - 'A' + 10);
    throw UsageError(fmt::format("NcclUniqueId: '{}' is not a hex digit", c));
  };
  if (text.size() != id.bytes.size() * 2) {
    throw UsageError(fmt::format("NcclUniqueId: expected {} hex digits, got {}",
                                 id.bytes.size() * 2, text.size()));
  }
  for (std::size_t i = 0; i < id.bytes.size(); ++i) {
    id.bytes[i] = static_cast<std::byte>(digit(text[2 * i]) << 4 | digit(text[2 * i + 1]));
  }
  return id;
}

namespace {

namespace fs = std::filesystem;

std::int64_t env_integer(const char* name, std::int64_t lo, std::int64_t hi) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') {
    throw UsageError(fmt::format(
        "make_nccl_transport_from_env: {} is not set (scripts/ep-launch.sh sets WORLD_SIZE, "
        "RANK, LOCAL_RANK and TILEOPS_EP_ID_FILE)",
        name));
  }
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (*end != '\0' || value < lo || value > hi) {
    throw UsageError(fmt::format(
        "make_nccl_transport_from_env: {}='{}' is not an integer in [{}, {}]", name, text, lo, hi));
  }
  return value;
}

/// Rank 0: a new id, written to a temporary name and renamed, so a reader sees all of it or none.
NcclUniqueId publish_id(const fs::path& file) {
  const NcclUniqueId id = nccl_unique_id();
  const fs::path partial = file.string() + ".partial";
  {
    std::ofstream out(partial);
    out << id.hex() << '\n';
    if (!out.flush()) {
      throw UsageError(
          fmt::format("make_nccl_transport_from_env: cannot write {}", partial.string()));
    }
  }
  std::error_code error;
  fs::rename(partial, file, error);
  if (error) {
    throw UsageError(fmt::format("make_nccl_transport_from_env: cannot rename {} to {}: {}",
                                 partial.string(), file.string(), error.message()));
  }
  return id;
}

/// The other ranks: wait for rank 0's file, bounded by the transport's timeout.
NcclUniqueId read_id(const fs::path& file, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!fs::exists(file)) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw ExpertParallelCommError(fmt::format(
          "make_nccl_transport_from_env: rank 0 did not publish its NCCL id in {} within {} ms",
          file.string(), timeout.count()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::ifstream in(file);
  std::string text;
  in >> text;
  return NcclUniqueId::from_hex(text);
}

}  // namespace

std::shared_ptr<ExpertParallelTransport> make_nccl_transport_from_env() {
  NcclTransportOptions options;
  options.world_size = env_integer("WORLD_SIZE", 1, 1 << 20);
  options.rank = env_integer("RANK", 0, options.world_size - 1);
  options.device = static_cast<int>(env_integer("LOCAL_RANK", 0, kMaxCudaDevices - 1));
  if (std::getenv("TILEOPS_EP_TIMEOUT_S") != nullptr) {
    options.timeout = std::chrono::seconds(env_integer("TILEOPS_EP_TIMEOUT_S", 1, 86400));
  }
  if (const char* id = std::getenv("TILEOPS_EP_UNIQUE_ID"); id != nullptr && *id != '\0') {
    return make_nccl_transport(NcclUniqueId::from_hex(id), options);
  }
  const char* file = std::getenv("TILEOPS_EP_ID_FILE");
  if (file == nullptr || *file == '\0') {
    throw UsageError(
        "make_nccl_transport_from_env: neither TILEOPS_EP_ID_FILE (a path rank 0 writes its "
        "NCCL id to, on a file system every rank sees) nor TILEOPS_EP_UNIQUE_ID is set");
  }
  const NcclUniqueId id = options.rank == 0 ? publish_id(file) : read_id(file, options.timeout);
  return make_nccl_transport(id, options);
}

}  // namespace tileops
