"""``python -m echomq.cli``: the ``echomq`` command."""

import sys

from echomq.cli.main import main

sys.exit(main())
