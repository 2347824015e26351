"""``python -m binlake``: the ``binlake`` command."""

import sys

from binlake.cli import main

sys.exit(main())
