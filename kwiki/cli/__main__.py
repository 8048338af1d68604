"""`python -m kwiki.cli`: the same as the `kwiki` command."""

import sys

from kwiki.cli import main

sys.exit(main())
