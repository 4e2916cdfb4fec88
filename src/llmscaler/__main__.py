"""`python -m llmscaler`: the same command line as the `llmscaler` console script."""

import sys

from llmscaler.cli import main

sys.exit(main())
