"""`python -m scripts.harness.reliability`: `semif reliability`, in a checkout whose `semif` is not on the PATH."""

import sys

from ...common.command import alias
from .. import reliability

sys.exit(alias(reliability))
