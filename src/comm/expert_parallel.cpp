// ExpertParallelPrepareFinalize: dispatch (prepare) and combine (finalize) over a transport, with
// the index arithmetic of expert_parallel_plan.h. The rows are packed, exchanged and combined on
// the transport's device (host memory for the in-process group, the GPU for NCCL); only the plan
// is computed on the host. Wire format and protocol: docs/design/expert-parallel.md.
#include <fmt/format.h>

#include <cstring>

#include "comm/expert_parallel_plan.h"
#include "comm/expert_parallel_rows.h"
#include "tileops/ops/moe_expert_parallel.h"

namespace tileops {

namespace ep = expert_parallel;

struct ExpertParallelPrepareFinalize::Pending {
  ep::DispatchPlan plan;
  std::vector<std::int64_t> recv_counts;  // rows received from each rank
  std::int64_t tokens = 0;
};

namespace {

/// Byte counts per peer for `rows` rows of `row_bytes` each.
std::vector<std::int64_t> bytes_of(const std::vector<std::int64_t>& rows, std::int64_t row_bytes) {
  std::vector<std::int64_t> bytes(rows.size());
  for (std::size_t p = 0; p < rows.size(); ++p) bytes[p] = rows[p] * row_bytes;
  return bytes;
}

std::span<const std::byte> bytes_view(const Tensor& t) {
  return {static_cast<const std::byte*>(t.data_ptr()), t.nbytes()};
}

std::span<std::byte> bytes_view(Tensor& t) {
  return {static_cast<std::byte*>(t.data_ptr()), t.nbytes()};
}

std::int64_t total(const std::vector<std::int64_t>& counts) {
  std::int64_t sum = 0;
  for (const std::int64_t c : counts) sum += c;
  return sum;
}

void expect_shape(const Tensor& t, const char* name, std::int64_t rows, std::int64_t cols,
                  DType dtype) {
  if (t.dim() != 2 || t.size(0) != rows || t.size(1) != cols || t.dtype() != dtype) {
    throw UsageError(fmt::format(
        "ExpertParallelPrepareFinalize: {} is {} {}, expected [{}, {}] {} (the group's "
        "configuration)",
        name, describe_sizes(t.sizes()), dtype_name(t.dtype()), rows, cols, dtype_name(dtype)));
  }
}

}  // namespace

ExpertParallelPrepareFinalize::ExpertParallelPrepareFinalize(
    std::shared_ptr<ExpertParallelTransport> transport, ExpertParallelConfig config)
    : transport_(std::move(transport)), config_(config) {
  if (!transport_) throw UsageError("ExpertParallelPrepareFinalize: no transport");
  placement_ = {.num_experts = config_.num_experts,
                .world_size = transport_->world_size(),
                .rank = transport_->rank()};
  // Every rank must agree before any token moves: a mismatch would otherwise surface as wrong
  // byte counts mid-exchange. The check is collective, so no rank raises alone.
  const std::vector<std::int64_t> mine = {config_.num_experts, config_.top_k, config_.hidden,
                                          static_cast<std::int64_t>(config_.dtype),
                                          placement_.world_size};
  const std::vector<std::int64_t> all = transport_->all_gather(mine);
  static constexpr const char* kFields[] = {"num_experts", "top_k", "hidden", "dtype",
                                            "world_size"};
  std::string mismatches;
  for (std::int64_t r = 0; r < placement_.world_size; ++r) {
    for (std::size_t f = 0; f < mine.size(); ++f) {
      const std::int64_t theirs = all[static_cast<std::size_t>(r) * mine.size() + f];
      if (theirs == all[f]) continue;
      const auto show = [&](std::int64_t v) {
        return f == 3 ? std::string(dtype_name(static_cast<DType>(v))) : std::to_string(v);
      };
      mismatches +=
          fmt::format("{}{} is {} on rank 0 but {} on rank {}", mismatches.empty() ? "" : "; ",
                      kFields[f], show(all[f]), show(theirs), r);
    }
  }
  if (!mismatches.empty()) {
    throw ExpertParallelConfigError(fmt::format(
        "ExpertParallelPrepareFinalize: the ranks of '{}' disagree on their configuration: {}",
        transport_->name(), mismatches));
  }
  placement_.validate();
  if (config_.top_k < 1 || config_.hidden < 1) {
    throw UsageError(
        fmt::format("ExpertParallelPrepareFinalize: top_k {} and hidden {} must be >= 1",
                    config_.top_k, config_.hidden));
  }
  const std::vector<std::int32_t> map = placement_.expert_map();
  expert_map_ = Tensor::empty({config_.num_experts}, DType::int32);
  std::memcpy(expert_map_.data_ptr(), map.data(), map.size() * sizeof(std::int32_t));
  expert_map_ = expert_map_.to(transport_->device());  // once, not per layer
}

ExpertParallelPrepareFinalize::~ExpertParallelPrepareFinalize() = default;

MoEPreparedTokens ExpertParallelPrepareFinalize::prepare(const Tensor& x,
                                                         const Tensor& topk_weights,
                                                         const Tensor& topk_ids) {
  const std::int64_t tokens = x.size(0);
  const std::int64_t hidden = config_.hidden;
  const std::int64_t top_k = config_.top_k;
  expect_shape(x, "x", tokens, hidden, config_.dtype);
  expect_shape(topk_weights, "topk_weights", tokens, top_k, DType::float32);
  expect_shape(topk_ids, "topk_ids", tokens, top_k, DType::int32);
  const Device wire = transport_->device();
  const Tensor xs = x.contiguous().to(wire);
  const Tensor ws = topk_weights.contiguous().to(wire);
  const Tensor ids = topk_ids.contiguous().to(wire);
  // The plan needs the ids on the host: the one device-to-host copy of a layer (the counts
  // exchange that follows synchronises anyway).
  const Tensor host_ids = ids.to(Device::cpu());

  auto pending = std::make_unique<Pending>();
  pending->tokens = tokens;
  pending->plan =
      ep::plan_dispatch({host_ids.data<std::int32_t>(), static_cast<std::size_t>(tokens * top_k)},
                        tokens, top_k, placement_);
  const ep::DispatchPlan& plan = pending->plan;
  pending->recv_counts = transport_->exchange_counts(plan.send_counts);

  // One packed row per (token, rank): the hidden row, then the token's top_k ids and weights (all
  // of them; the receiver's expert map drops the ones it does not hold).
  const auto x_bytes = static_cast<std::int64_t>(element_size(config_.dtype)) * hidden;
  const std::int64_t id_bytes = top_k * 4;
  const std::int64_t row_bytes = x_bytes + 2 * id_bytes;
  const std::int64_t sent = plan.send_offsets.back();
  Tensor send = Tensor::empty({sent * row_bytes}, DType::uint8, wire);
  const Tensor send_tokens = ep::index_tensor(plan.send_tokens, wire);
  const auto* order = send_tokens.data<std::int64_t>();
  const ep::PackedRow packed{row_bytes, x_bytes, id_bytes};
  ep::copy_rows(ep::pack(send, packed.x(), xs, x_bytes, sent, order), wire);
  ep::copy_rows(ep::pack(send, packed.ids(), ids, id_bytes, sent, order), wire);
  ep::copy_rows(ep::pack(send, packed.weights(), ws, id_bytes, sent, order), wire);

  const std::int64_t received = total(pending->recv_counts);
  Tensor recv = Tensor::empty({received * row_bytes}, DType::uint8, wire);
  transport_->all_to_all(bytes_view(send), bytes_of(plan.send_counts, row_bytes), bytes_view(recv),
                         bytes_of(pending->recv_counts, row_bytes));

  MoEPreparedTokens out{Tensor::empty({received, hidden}, config_.dtype, wire),
                        Tensor::empty({received, top_k}, DType::float32, wire),
                        Tensor::empty({received, top_k}, DType::int32, wire), expert_map_};
  ep::copy_rows(ep::unpack(out.x, recv, packed.x(), x_bytes, received), wire);
  ep::copy_rows(ep::unpack(out.topk_ids, recv, packed.ids(), id_bytes, received), wire);
  ep::copy_rows(ep::unpack(out.topk_weights, recv, packed.weights(), id_bytes, received), wire);
  pending_ = std::move(pending);
  const Device device = x.device();
  return {out.x.to(device), out.topk_weights.to(device), out.topk_ids.to(device),
          out.expert_map.to(device)};
}

void ExpertParallelPrepareFinalize::finalize(const Tensor& expert_output, const Tensor& y) {
  if (!pending_) throw UsageError("ExpertParallelPrepareFinalize: finalize without a prepare");
  const std::unique_ptr<Pending> pending = std::move(pending_);
  const ep::DispatchPlan& plan = pending->plan;
  const std::int64_t hidden = config_.hidden;
  expect_shape(expert_output, "expert_output", total(pending->recv_counts), hidden, config_.dtype);
  expect_shape(y, "y", pending->tokens, hidden, config_.dtype);

  // The received rows go back the way they came: the rows from rank p return to p, and land at
  // the index of their send row there.
  const Device wire = transport_->device();
  const Tensor out = expert_output.contiguous().to(wire);
  const auto row_bytes = static_cast<std::int64_t>(element_size(config_.dtype)) * hidden;
  Tensor returned = Tensor::empty({plan.send_offsets.back(), hidden}, config_.dtype, wire);
  transport_->all_to_all(bytes_view(out), bytes_of(pending->recv_counts, row_bytes),
                         bytes_view(returned), bytes_of(plan.send_counts, row_bytes));

  // Each rank's partial was rounded to the dtype by its post-permute; the sum of the partials is
  // taken in float32 in rank order and rounded once more (the tolerance this costs:
  // expert-parallel.md).
  const bool in_place = y.is_contiguous() && y.device() == wire;
  Tensor combined = in_place ? y : Tensor::empty({pending->tokens, hidden}, config_.dtype, wire);
  ep::combine(returned, plan, combined, wire);
  if (!in_place) y.copy_(combined);
}

}  // namespace tileops
