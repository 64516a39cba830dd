"""`pip install ./clients/python ./clients/python/google_adk` into a fresh
virtual environment, offline, then the package imported from outside the
checkout: testsupport/adapter_install.py does it for every adapter; this
file names what is this adapter's (GatedTool is an ADK FunctionTool)."""

from __future__ import annotations

import os
import unittest
from typing import Any

from adapter_install import AdapterInstall


class Install(AdapterInstall, unittest.TestCase):
    package_dir = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    module = "countersign_google_adk"
    dist = "countersign-google-adk"
    install = "countersign-google-adk"
    framework = "google.adk"
    framework_label = "google-adk"
    framework_requirement = "google-adk<2.14,>=2.13"
    probe = (
        "from countersign_google_adk import GatedTool, action_tool, confirm, gated, pending_confirmations\n"
        "from google.adk.tools.function_tool import FunctionTool\n"
        "extra = issubclass(GatedTool, FunctionTool)\n"
    )

    def check_extra(self, extra: Any) -> None:
        self.assertTrue(extra)


if __name__ == "__main__":
    unittest.main()
