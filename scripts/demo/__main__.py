"""`python -m scripts.demo`: `semif demo`, in a checkout whose `semif` is not on the PATH."""

import sys

from .. import demo
from ..common.command import alias

sys.exit(alias(demo))
