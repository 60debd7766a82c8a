"""`python -m scripts.package`: `semif package`, in a checkout whose `semif` is not on the PATH."""

import sys

from .. import package
from ..common.command import alias

sys.exit(alias(package))
