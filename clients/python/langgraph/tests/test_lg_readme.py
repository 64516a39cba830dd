"""README.md's example against the demo, in a process of its own, with this
test as bob, who approves: testsupport/adapter_readme.py does it for every
adapter; this file names what is this adapter's (a graph with a ToolNode
whose stand-in model reports the ToolMessage's status and content)."""

from __future__ import annotations

import os
import unittest

from adapter_readme import AdapterReadme


class ReadmeExample(AdapterReadme, unittest.TestCase):
    package_dir = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    short = "lg"
    answer = 'success: {"refunded": 40}'


if __name__ == "__main__":
    unittest.main()
