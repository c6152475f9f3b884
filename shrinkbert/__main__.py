"""`python -m shrinkbert COMMAND ...` is the `shrinkbert` command."""
import sys

from shrinkbert.cli import main

sys.exit(main())
