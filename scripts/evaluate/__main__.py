"""`python -m scripts.evaluate`: `semif evaluate`, in a checkout whose `semif` is not on the PATH."""

import sys

from .. import evaluate
from ..common.command import alias

sys.exit(alias(evaluate))
