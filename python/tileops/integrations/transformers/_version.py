"""The transformers versions the integration is written and tested against."""

from __future__ import annotations

import re

# [MIN, MAX): tested on the oldest and the newest (python/tests/test_integrations_transformers.py
# runs on whatever is installed; docs/design/integrations.md lists the versions it ran on).
MIN_VERSION = (5, 17)
MAX_VERSION = (6, 0)
SUPPORTED = ">=5.17,<6"


def parse(version: str) -> tuple[int, int]:
    """(major, minor) of a version string ("5.26.0.dev0" -> (5, 26))."""
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        raise ImportError(f"tileops.integrations.transformers: cannot read the transformers version {version!r}")
    return int(match.group(1)), int(match.group(2))


def check(version: str) -> None:
    """Raises ImportError unless `version` is in the supported range."""
    found = parse(version)
    if not MIN_VERSION <= found < MAX_VERSION:
        raise ImportError(
            f"tileops.integrations.transformers supports transformers {SUPPORTED} (the modules it "
            f"swaps are those releases' classes); found transformers {version}: "
            f"pip install 'transformers{SUPPORTED}'"
        )
