"""`pip install ./clients/python ./clients/python/langgraph` into a fresh
virtual environment, offline, then the package imported from outside the
checkout: testsupport/adapter_install.py does it for every adapter; this
file names what is this adapter's (its middleware is a HumanInTheLoopMiddleware)."""

from __future__ import annotations

import os
import unittest
from typing import Any

from adapter_install import AdapterInstall


class Install(AdapterInstall, unittest.TestCase):
    package_dir = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    module = "countersign_langgraph"
    dist = "countersign-langgraph"
    install = "countersign-langgraph[agents]"
    framework = "langgraph"
    framework_label = "langgraph"
    framework_requirement = "langgraph<1.3,>=1.2"
    probe = (
        "from countersign_langgraph import CountersignMiddleware, action_tool, gated, resume\n"
        "extra = CountersignMiddleware.__mro__[1].__name__\n"
    )

    def check_extra(self, extra: Any) -> None:
        self.assertEqual(extra, "HumanInTheLoopMiddleware")


if __name__ == "__main__":
    unittest.main()
