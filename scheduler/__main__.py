"""`python -m scheduler ...` is `goalfleet ...` (works without the console script)."""

import sys

from scheduler.cli.main import console_main

sys.exit(console_main())
