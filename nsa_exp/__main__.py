"""``python -m nsa_exp``: see :mod:`nsa_exp.cli`."""

import sys

from .cli import main

sys.exit(main())
