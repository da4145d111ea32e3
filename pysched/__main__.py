"""``python -m pysched``: the command line (:mod:`pysched.cli`)."""
import sys

from pysched.cli import main

sys.exit(main())
