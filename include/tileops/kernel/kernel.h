// Deprecated path: moved to tileops/dispatch/kernel.h (CHANGELOG.md, Unreleased). This
// forwarding header is kept through the next release; include the new path.
#pragma once

#include "tileops/dispatch/kernel.h"
