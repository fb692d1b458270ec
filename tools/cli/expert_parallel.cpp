// `tileops ep-check`: the multi-GPU check of expert parallelism, one process per rank under
// scripts/ep-launch.sh (docs/design/expert-parallel.md). ep-check builds the same
// global batch on every rank (same seeds), runs its share of the layer through the NCCL
// prepare/finalize with its own experts, compares with the single-device layer on its tokens, and
// times dispatch, combine, the layer and NCCL's all-to-all of the same bytes; rank 0 prints the
// group's figures.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "cli.h"
#include "tileops/core/cuda.h"
#include "tileops/ops/moe.h"
#include "tileops/ops/moe_nccl.h"

namespace tileops::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// Uniform weights of variance 1/fan-in, as the bench's MoE workloads (identical on every rank).
Tensor expert_weights(Sizes sizes, DType dtype, std::uint64_t seed, Device device) {
  const double bound = std::sqrt(3.0 / static_cast<double>(sizes.back()));
  return Tensor::rand(std::move(sizes), dtype, seed, device, -bound, bound);
}

double max_abs_difference(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(Device::cpu()).to(DType::float32);
  const Tensor y = b.to(Device::cpu()).to(DType::float32);
  double worst = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const double d = std::abs(static_cast<double>(x.data<float>()[i]) - y.data<float>()[i]);
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
}

double max_abs(const Tensor& a) {
  const Tensor x = a.to(Device::cpu()).to(DType::float32);
  double worst = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(x.data<float>()[i])));
  }
  return worst;
}

}  // namespace

CLI::App* add_ep_check_command(CLI::App& app, EpCheckOptions& o) {
  CLI::App* cmd = app.add_subcommand(
      "ep-check",
      "Run one expert-parallel MoE layer per rank (under scripts/ep-launch.sh: WORLD_SIZE, RANK, "
      "LOCAL_RANK, TILEOPS_EP_ID_FILE), compare with the single-device layer and time "
      "dispatch, combine and NCCL all-to-all of the same bytes");
  cmd->add_option("--tokens", o.tokens, "tokens per rank")->default_val(o.tokens);
  cmd->add_option("--experts", o.experts, "experts in the layer")->default_val(o.experts);
  cmd->add_option("--hidden", o.hidden, "hidden size")->default_val(o.hidden);
  cmd->add_option("--ffn", o.ffn, "expert intermediate size")->default_val(o.ffn);
  cmd->add_option("--top-k", o.top_k, "experts per token")->default_val(o.top_k);
  cmd->add_option("--routing", o.routing, "random or hot (one expert takes every token)")
      ->check(CLI::IsMember({"random", "hot"}))
      ->default_val(o.routing);
  cmd->add_option("--dtype", o.dtype, "bfloat16 or float16")
      ->check(CLI::IsMember({"bfloat16", "float16"}))
      ->default_val(o.dtype);
  cmd->add_option("--iters", o.iters, "timed layers")->default_val(o.iters);
  cmd->add_flag("!--no-reference", o.reference,
                "Skip the single-device comparison (which needs every expert on every rank)");
  cmd->add_option("--mismatch-rank", o.mismatch_rank,
                  "Failure test: this rank asks for top_k + 1 (every rank must raise "
                  "ExpertParallelConfigError)");
  cmd->add_option("--fail-rank", o.fail_rank,
                  "Failure test: this rank exits after setup (the others must raise "
                  "ExpertParallelCommError within the timeout)");
  return cmd;
}

int run_ep_check(const EpCheckOptions& o) {
  const auto transport = make_nccl_transport_from_env();
  const std::int64_t world = transport->world_size(), rank = transport->rank();
  const Device device = transport->device();
  const DType dtype = *dtype_from_name(o.dtype);
  const std::int64_t m = o.tokens, experts = o.experts, per_rank = experts / world;
  if (experts % world != 0) {
    throw UsageFailure(
        fmt::format("--experts {} is not divisible by the world size {}", experts, world));
  }

  // The global batch, identical on every rank; this rank's tokens are rows [rank m, (rank+1) m).
  const Tensor logits_all = Tensor::randn({m * world, experts}, DType::float32, 2, Device::cpu());
  if (o.routing == "hot") {
    for (std::int64_t t = 0; t < m * world; ++t) logits_all.data<float>()[t * experts] += 8.0f;
  }
  const Tensor x =
      Tensor::randn({m * world, o.hidden}, dtype, 1, device).slice(0, rank * m, (rank + 1) * m);
  const Tensor logits = logits_all.slice(0, rank * m, (rank + 1) * m).to(device);
  // Every rank needs all experts only for the single-device reference.
  const std::int64_t held = o.reference ? experts : per_rank;
  const std::int64_t first = o.reference ? rank * per_rank : 0;
  const Tensor w13 = expert_weights({held, 2 * o.ffn, o.hidden}, dtype, 3, device);
  const Tensor w2 = expert_weights({held, o.hidden, o.ffn}, dtype, 4, device);
  const Tensor w13_local = w13.slice(0, first, first + per_rank);
  const Tensor w2_local = w2.slice(0, first, first + per_rank);

  const std::int64_t top_k = o.top_k + (rank == o.mismatch_rank ? 1 : 0);
  ExpertParallelPrepareFinalize pf(transport, {experts, top_k, o.hidden, dtype});
  if (rank == o.fail_rank) {
    fmt::print(stderr, "tileops ep-check: rank {} exits now (--fail-rank)\n", rank);
    std::_Exit(3);
  }
  MoETopKRoutingFwdOp routing({.top_k = o.top_k, .renormalize = true});
  FusedMoEExpertsFwdOp expert_op({});
  const Tensor y = Tensor::empty({m, o.hidden}, dtype, device);

  double dispatch_s = 0, combine_s = 0, layer_s = 0, peak_partial = 0;
  std::int64_t received = 0;
  for (int it = -1; it < o.iters; ++it) {  // it == -1: warm-up
    cuda_synchronize(device.index);
    const auto t0 = Clock::now();
    const auto [w, ids] = routing(logits, Tensor());
    const auto t1 = Clock::now();
    const MoEPreparedTokens in = pf.prepare(x, w, ids);
    cuda_synchronize(device.index);
    const double dispatch = seconds_since(t1);
    const Tensor partial =
        expert_op(in.x, in.topk_weights, in.topk_ids, w13_local, w2_local, in.expert_map);
    cuda_synchronize(device.index);
    const auto t2 = Clock::now();
    pf.finalize(partial, y);
    cuda_synchronize(device.index);
    if (it < 0) {
      received = in.x.size(0);
      peak_partial = max_abs(partial);
      continue;
    }
    combine_s += seconds_since(t2);
    dispatch_s += dispatch;
    layer_s += seconds_since(t0);
  }
  const double iters = std::max(1, o.iters);

  // NCCL's own all-to-all of the same bytes: the group's mean receive volume, split evenly.
  const std::int64_t row_bytes =
      o.hidden * static_cast<std::int64_t>(element_size(dtype)) + 8 * o.top_k;
  const std::vector<std::int64_t> all_received = transport->all_gather({&received, 1});
  const std::int64_t mean_rows =
      std::accumulate(all_received.begin(), all_received.end(), std::int64_t{0}) / world;
  const std::int64_t per_peer = mean_rows * row_bytes / world;
  Tensor send = Tensor::empty({per_peer * world}, DType::uint8, device);
  Tensor recv = Tensor::empty({per_peer * world}, DType::uint8, device);
  const std::vector<std::int64_t> counts(static_cast<std::size_t>(world), per_peer);
  double a2a_s = 0;
  for (int it = -1; it < o.iters; ++it) {
    cuda_synchronize(device.index);
    const auto t0 = Clock::now();
    transport->all_to_all({static_cast<const std::byte*>(send.data_ptr()), send.nbytes()}, counts,
                          {static_cast<std::byte*>(recv.data_ptr()), recv.nbytes()}, counts);
    if (it >= 0) a2a_s += seconds_since(t0);
  }

  double error = 0, bound = 0;
  if (o.reference) {
    FusedMoEFwdOp single({.top_k = o.top_k, .renormalize = true});
    const Tensor ref = single(x, logits, w13, w2);
    error = max_abs_difference(y, ref);
    // One extra rounding per rank partial (expert-parallel.md § Protocol).
    const double u = dtype == DType::bfloat16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
    bound = 3.1 * u * static_cast<double>(std::min(o.top_k, world)) * peak_partial;
  }
  const bool ok = !(error > bound);

  // Rank 0 prints every rank's figures (ns, bytes), gathered through the transport.
  const auto ns = [&](double s) { return static_cast<std::int64_t>(s / iters * 1e9); };
  const std::vector<std::int64_t> mine = {ns(dispatch_s),
                                          ns(combine_s),
                                          ns(layer_s),
                                          ns(a2a_s),
                                          received * row_bytes,
                                          static_cast<std::int64_t>(error * 1e9),
                                          static_cast<std::int64_t>(bound * 1e9),
                                          ok ? 1 : 0};
  const std::vector<std::int64_t> all = transport->all_gather(mine);
  if (rank == 0) {
    Table t;
    t.columns = {"rank",          "rows in",  "dispatch",  "combine", "layer", "all-to-all",
                 "dispatch GB/s", "a2a GB/s", "max error", "bound",   "ok"};
    for (std::int64_t r = 0; r < world; ++r) {
      const std::int64_t* f = &all[static_cast<std::size_t>(r) * mine.size()];
      const double gb = static_cast<double>(f[4]) / 1e9;
      t.rows.push_back(
          {Cell::integer_(r), Cell::integer_(f[4] / row_bytes),
           Cell::string(format_duration(f[0] * 1e-9)), Cell::string(format_duration(f[1] * 1e-9)),
           Cell::string(format_duration(f[2] * 1e-9)), Cell::string(format_duration(f[3] * 1e-9)),
           Cell::string(format_rate(gb / (f[0] * 1e-9))),
           Cell::string(format_rate(static_cast<double>(per_peer * world) / 1e9 / (f[3] * 1e-9))),
           Cell::string(format_sig(f[5] * 1e-9, 3)), Cell::string(format_sig(f[6] * 1e-9, 3)),
           Cell::string(f[7] != 0 ? "yes" : "NO")});
    }
    fmt::print(
        "ep-check: world {}, {} tokens per rank, E {}, top-{}, hidden {}, ffn {}, {}, "
        "{} routing, {} iterations\n{}",
        world, m, experts, o.top_k, o.hidden, o.ffn, o.dtype, o.routing, o.iters, render_table(t));
  }
  bool all_ok = true;
  for (std::int64_t r = 0; r < world; ++r) all_ok = all_ok && all[r * mine.size() + 7] != 0;
  return all_ok ? 0 : kExitFailure;
}

}  // namespace tileops::cli
