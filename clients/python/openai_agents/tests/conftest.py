"""pytest's setup for countersign-openai-agents's tests: the client, this
package and the client's test helpers (tests/server.py) are imported from
this checkout."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
for p in (os.path.join(HERE, "..", "..", "tests"), os.path.join(HERE, "..", "..", "testsupport"), os.path.join(HERE, ".."), os.path.join(HERE, "..", "..")):
    sys.path.insert(0, os.path.abspath(p))
