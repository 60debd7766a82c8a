"""`python -m scripts.batch`: `semif batch`, in a checkout whose `semif` is not on the PATH."""

import sys

from .. import batch
from ..common.command import alias

sys.exit(alias(batch))
