"""`python -m semif_adapter serve`: the same entry point as the image's `serve`."""

import sys

from .server import main

if __name__ == "__main__":
    sys.exit(main())
