"""`python -m scripts.local`: `semif local`, in a checkout whose `semif` is not on the PATH."""

import sys

from .. import local
from ..common.command import alias

sys.exit(alias(local))
