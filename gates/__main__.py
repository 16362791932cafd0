"""`python -m corral.gates` runs the `corral` command."""

import sys

from corral.gates.cli.main import main

sys.exit(main())
