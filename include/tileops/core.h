// The tileops core: dtypes, devices, errors, the tensor, CUDA runtime helpers and DLPack.
#pragma once

#include "tileops/core/cuda.h"
#include "tileops/core/device.h"
#include "tileops/core/dlpack.h"
#include "tileops/core/dtype.h"
#include "tileops/core/error.h"
#include "tileops/core/half.h"
#include "tileops/core/tensor.h"
#include "tileops/core/value.h"
