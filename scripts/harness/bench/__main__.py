"""`python -m scripts.harness.bench`: `semif bench`, in a checkout whose `semif` is not on the PATH."""

import sys

from ...common.command import alias
from .. import bench

sys.exit(alias(bench))
