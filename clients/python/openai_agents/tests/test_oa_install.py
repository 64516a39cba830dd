"""`pip install ./clients/python ./clients/python/openai_agents` into a fresh
virtual environment, offline, then the package imported from outside the
checkout: testsupport/adapter_install.py does it for every adapter; this
file names what is this adapter's (gated() makes a FunctionTool)."""

from __future__ import annotations

import os
import unittest
from typing import Any

from adapter_install import AdapterInstall


class Install(AdapterInstall, unittest.TestCase):
    package_dir = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    module = "countersign_openai_agents"
    dist = "countersign-openai-agents"
    install = "countersign-openai-agents"
    framework = "agents"
    framework_label = "openai-agents"
    framework_requirement = "openai-agents<0.25,>=0.24"
    probe = (
        "from countersign_openai_agents import NotDecided, action_tool, gated, proposal_id\n"
        "def echo(text: str) -> str:\n"
        "    \"\"\"Echo.\"\"\"\n"
        "    return text\n"
        "extra = type(gated(echo, countersign.Client('http://127.0.0.1:9', 'ck'))).__name__\n"
    )

    def check_extra(self, extra: Any) -> None:
        self.assertEqual(extra, "FunctionTool")


if __name__ == "__main__":
    unittest.main()
