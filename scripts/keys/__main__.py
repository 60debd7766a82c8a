"""`python -m scripts.keys`: `semif keys`, in a checkout whose `semif` is not on the PATH."""

import sys

from .. import keys
from ..common.command import alias

sys.exit(alias(keys))
