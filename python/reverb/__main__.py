"""`python -m reverb`: the `reverb` command (reverb/cli.py)."""

import sys

from reverb import cli

sys.exit(cli.main())
