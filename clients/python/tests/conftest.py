"""pytest's setup for these tests: the package is imported from this
checkout (clients/python), not from wherever else it may be installed."""

import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
