"""``python -m vijax ...``: the ``vijax`` command (useful where the console script is not on PATH)."""

import sys

from vijax.run._cli import main

if __name__ == "__main__":
    sys.exit(main())
