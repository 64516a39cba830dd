"""pytest's setup for countersign-pydantic-ai's tests: the client, this
package and the client's test helpers (tests/server.py) are imported from
this checkout. (clients/python/pydantic_ai has no __init__.py, so the
framework's own ``pydantic_ai``, a regular package, still wins the import.)"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
for p in (os.path.join(HERE, "..", "..", "tests"), os.path.join(HERE, "..", "..", "testsupport"), os.path.join(HERE, ".."), os.path.join(HERE, "..", "..")):
    sys.path.insert(0, os.path.abspath(p))
