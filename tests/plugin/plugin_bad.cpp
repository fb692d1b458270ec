// A backend plugin that registers, then fails: its registrations must be rolled back.
#include <stdexcept>

#include "tileops/target/target.h"

extern "C" void tileops_backend_register() {
  using namespace tileops;
  register_detector("half_registered", [](const Device&) { return false; });
  register_kernel_builder("RMSNormFwdOp", "half_registered",
                          [](auto, const ParamMap&) { return TargetKernel(); });
  throw std::runtime_error("plugin_bad gave up halfway");
}
