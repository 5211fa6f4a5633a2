"""User-facing errors: one line, naming the problem and the fix, exit code 2.

>>> err = UserError("config.shape.T: 100 is not a multiple of block_size 64; use a multiple of 64")
>>> str(err).startswith("config.shape.T")
True
"""


class UserError(Exception):
    """A problem the user can fix (bad input, wrong environment). The CLI prints it on one line, exit 2."""

    exit_code = 2


class GateFailure(UserError):
    """A correctness or environment gate failed (wrong GPU, FLA sources, env vars, unequal edges)."""
