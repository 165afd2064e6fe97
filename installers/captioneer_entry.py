"""Entry script of the frozen app (PyInstaller): the ``captioneer`` command, and the worker processes.

The inference worker is a ``spawn`` child; in a frozen app the child is this same executable, so
``freeze_support()`` must run first to turn it into the worker instead of a second app.
"""

import multiprocessing
import sys

if __name__ == "__main__":
    multiprocessing.freeze_support()
    from app.launcher import main

    sys.exit(main())
