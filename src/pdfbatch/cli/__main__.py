"""`python -m pdfbatch.cli`: the same as the `pdfbatch` console script."""

import sys

from pdfbatch.cli import main

sys.exit(main())
