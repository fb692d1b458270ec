// The in-process expert-parallel group (loopback_transport.h). A collective is: post this rank's
// buffers, barrier, read the peers' posts, barrier (so no post is overwritten while read).
#include "comm/loopback_transport.h"

#include <fmt/format.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>

#include "comm/expert_parallel_plan.h"

namespace tileops {

struct LoopbackGroup::State {
  struct Post {
    std::span<const std::byte> bytes;
    std::vector<std::int64_t> values;
  };

  std::int64_t world_size;
  std::chrono::milliseconds timeout;
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t generation = 0;
  std::vector<char> present;  // ranks arrived at the current barrier
  std::int64_t arrived = 0;
  std::optional<std::string> failure;
  std::vector<Post> posts;

  State(std::int64_t n, std::chrono::milliseconds t)
      : world_size(n),
        timeout(t),
        present(static_cast<std::size_t>(n), 0),
        posts(static_cast<std::size_t>(n)) {}

  [[noreturn]] void raise_failure() const {
    throw ExpertParallelCommError("expert-parallel loopback group: " + *failure);
  }

  /// Fails the group, `mu` held (the first failure is the one every rank reports).
  [[noreturn]] void fail_locked(std::string reason) {
    if (!failure) failure = std::move(reason);
    cv.notify_all();
    raise_failure();
  }

  void barrier(std::int64_t rank, const char* what) {
    std::unique_lock lock(mu);
    if (failure) raise_failure();
    const std::uint64_t gen = generation;
    present[static_cast<std::size_t>(rank)] = 1;
    if (++arrived == world_size) {
      arrived = 0;
      std::fill(present.begin(), present.end(), 0);
      ++generation;
      cv.notify_all();
      return;
    }
    cv.wait_for(lock, timeout, [&] { return generation != gen || failure.has_value(); });
    if (generation != gen) return;
    if (failure) raise_failure();
    std::string missing;
    for (std::int64_t r = 0; r < world_size; ++r) {
      if (present[static_cast<std::size_t>(r)] == 0) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
    }
    fail_locked(fmt::format("rank {} waited {} ms in {} for rank(s) {}, which never arrived", rank,
                            timeout.count(), what, missing));
  }

  void post(std::int64_t rank, Post p) {
    const std::lock_guard lock(mu);
    if (failure) raise_failure();
    posts[static_cast<std::size_t>(rank)] = std::move(p);
  }

  [[noreturn]] void fail_now(std::string reason) {
    const std::lock_guard lock(mu);
    fail_locked(std::move(reason));
  }
};

namespace {

class LoopbackTransport final : public ExpertParallelTransport {
 public:
  LoopbackTransport(std::shared_ptr<LoopbackGroup::State> state, std::int64_t rank)
      : state_(std::move(state)), rank_(rank) {}
  std::string name() const override { return "loopback"; }
  std::int64_t rank() const override { return rank_; }
  std::int64_t world_size() const override { return state_->world_size; }

  std::vector<std::int64_t> all_gather(std::span<const std::int64_t> mine) override {
    state_->post(rank_, {{}, {mine.begin(), mine.end()}});
    state_->barrier(rank_, "all_gather");
    std::vector<std::int64_t> all;
    for (const auto& p : state_->posts) {
      if (p.values.size() != mine.size()) {
        state_->fail_now(fmt::format("all_gather lengths differ ({} on rank {}, {} elsewhere)",
                                     mine.size(), rank_, p.values.size()));
      }
      all.insert(all.end(), p.values.begin(), p.values.end());
    }
    state_->barrier(rank_, "all_gather");
    return all;
  }

  std::vector<std::int64_t> exchange_counts(std::span<const std::int64_t> send_counts) override {
    expect_per_peer(send_counts.size(), "exchange_counts");
    state_->post(rank_, {{}, {send_counts.begin(), send_counts.end()}});
    state_->barrier(rank_, "exchange_counts");
    std::vector<std::int64_t> recv;
    for (const auto& p : state_->posts) recv.push_back(p.values[static_cast<std::size_t>(rank_)]);
    state_->barrier(rank_, "exchange_counts");
    return recv;
  }

  void all_to_all(std::span<const std::byte> send, std::span<const std::int64_t> send_bytes,
                  std::span<std::byte> recv, std::span<const std::int64_t> recv_bytes) override {
    expect_per_peer(send_bytes.size(), "all_to_all");
    expect_per_peer(recv_bytes.size(), "all_to_all");
    state_->post(rank_, {send, {send_bytes.begin(), send_bytes.end()}});
    state_->barrier(rank_, "all_to_all");
    const auto recv_offsets = expert_parallel::prefix_offsets(recv_bytes);
    for (std::int64_t p = 0; p < world_size(); ++p) {
      const auto& post = state_->posts[static_cast<std::size_t>(p)];
      const auto from = expert_parallel::prefix_offsets(post.values);
      const std::int64_t n = post.values[static_cast<std::size_t>(rank_)];
      if (n != recv_bytes[static_cast<std::size_t>(p)]) {
        state_->fail_now(fmt::format("rank {} expected {} bytes from rank {}, which sent {}", rank_,
                                     recv_bytes[static_cast<std::size_t>(p)], p, n));
      }
      if (n > 0) {
        std::memcpy(recv.data() + recv_offsets[static_cast<std::size_t>(p)],
                    post.bytes.data() + from[static_cast<std::size_t>(rank_)],
                    static_cast<std::size_t>(n));
      }
    }
    state_->barrier(rank_, "all_to_all");
  }

 private:
  void expect_per_peer(std::size_t n, const char* what) const {
    if (static_cast<std::int64_t>(n) != world_size()) {
      throw UsageError(
          fmt::format("loopback {}: {} per-peer counts for a group of {}", what, n, world_size()));
    }
  }

  std::shared_ptr<LoopbackGroup::State> state_;
  std::int64_t rank_;
};

}  // namespace

LoopbackGroup::LoopbackGroup(std::int64_t world_size, std::chrono::milliseconds timeout)
    : state_(std::make_shared<State>(world_size, timeout)) {
  if (world_size < 1) throw UsageError("LoopbackGroup: world size must be >= 1");
}

LoopbackGroup::~LoopbackGroup() = default;

std::shared_ptr<ExpertParallelTransport> LoopbackGroup::transport(std::int64_t rank) {
  if (rank < 0 || rank >= state_->world_size) {
    throw UsageError(
        fmt::format("LoopbackGroup: rank {} outside a group of {}", rank, state_->world_size));
  }
  return std::make_shared<LoopbackTransport>(state_, rank);
}

void LoopbackGroup::abort(std::int64_t rank, const std::string& reason) {
  const std::lock_guard lock(state_->mu);
  if (!state_->failure) state_->failure = fmt::format("rank {} failed: {}", rank, reason);
  state_->cv.notify_all();
}

}  // namespace tileops
