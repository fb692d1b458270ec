// `tileops calibrate`: measures the hardware profile of a device (copy bandwidth, fp32 rate) and
// saves it where profile_for() finds it.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli.h"
#include "tileops/core/cuda.h"
#include "tileops/perf/hardware.h"

namespace tileops::cli {

CLI::App* add_calibrate_command(CLI::App& app, CalibrateOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "Measure a device's peak copy bandwidth and fp32 rate (a GPU with a datasheet keeps its "
      "tensor-core peaks) and save the profile that `tileops bench` uses");
  cmd->add_option("--device", options.device, "cpu, cuda or cuda:<n>")->default_str("cpu");
  add_format_option(*cmd, options.format);
  cmd->add_flag("!--no-save", options.save, "Print the measurement without saving it");
  cmd->add_flag("--show", options.show,
                "Print the profile in use for the device (saved, datasheet or probe) and measure "
                "nothing");
  return cmd;
}

int run_calibrate(const CalibrateOptions& options) {
  Device device;
  try {
    device = Device::parse(options.device);
  } catch (const std::exception&) {
    throw UsageFailure(
        fmt::format("--device '{}': expected cpu, cuda or cuda:<n>", options.device));
  }
  if (device.is_cuda() && (!cuda_available() || device.index >= cuda_device_count())) {
    throw UsageFailure(
        fmt::format("--device {}: no such CUDA device is available", options.device));
  }
  perf::HardwareProfile profile;
  std::string saved_to;
  if (options.show) {
    profile = perf::profile_for(device);
  } else {
    fmt::print(stderr, "tileops calibrate: measuring {} ...\n", device.str());
    profile = device.is_cpu()
                  ? perf::measure_cpu_profile(perf::ProbeEffort::careful)
                  : perf::measure_cuda_profile(device.index, perf::ProbeEffort::careful);
    if (options.save) {
      const auto path = perf::saved_profile_path(perf::saved_profile_key(device));
      perf::save_profile(profile, path);
      saved_to = path.string();
    }
  }

  if (options.format == Format::json) {
    fmt::print("{}", perf::profile_to_json(profile));
  } else {
    Table t;
    t.columns = {"figure", "value"};
    t.rows.push_back({Cell::string("device"), Cell::string(device.str())});
    t.rows.push_back({Cell::string("name"), Cell::string(profile.name)});
    t.rows.push_back({Cell::string("mem_bandwidth"),
                      Cell::string(fmt::format(
                          "{} GB/s", format_sig(profile.mem_bandwidth_bytes_per_s / 1e9, 4)))});
    for (const auto& [key, rate] : profile.flops_per_s) {
      t.rows.push_back(
          {Cell::string(key), Cell::string(fmt::format("{} TFLOP/s", format_sig(rate / 1e12, 4)))});
    }
    t.rows.push_back({Cell::string("source"), Cell::string(profile.source)});
    if (options.format == Format::csv) {
      fmt::print("{}", render_csv(t));
    } else {
      fmt::print("{}", render_table(t));
    }
  }
  if (!saved_to.empty()) fmt::print(stderr, "tileops calibrate: saved {}\n", saved_to);
  return 0;
}

}  // namespace tileops::cli
