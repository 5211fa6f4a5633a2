"""``python -m nsa_exp``: see :mod:`nsa_exp.cli`."""

import sys

from .errors import UserError

try:
    from .cli import main
except UserError as exc:  # the package reads some schemas as it is imported: a damaged one is one line, not a traceback
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(exc.exit_code)

sys.exit(main())
