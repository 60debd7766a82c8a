"""The two ways a batch run ends early, as the command line reports them."""

from __future__ import annotations


class BatchRefused(Exception):  # noqa: N818 (a verdict on the input, not a programming error)
    """The input, the output file or the options cannot be used as given (exit status 2); nothing was sent."""


class BatchFailure(Exception):  # noqa: N818
    """The run could not go on (exit status 1): unreachable endpoint, failed job. Lines already written stay."""
