"""`python -m scheduler ...` is `goalfleet ...` (works without the console script)."""

import sys

from scheduler.cli.main import main

sys.exit(main())
