"""Entry point of ``python -m bench``."""
import sys

from .harness import main

sys.exit(main())
