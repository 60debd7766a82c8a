"""`python -m scripts.smoke`: `semif smoke`, in a checkout whose `semif` is not on the PATH."""

import sys

from .. import smoke
from ..common.command import alias

sys.exit(alias(smoke))
