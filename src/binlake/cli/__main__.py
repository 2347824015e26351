"""``python -m binlake.cli``: the ``binlake`` command."""

import sys

from binlake.cli import main

sys.exit(main())
