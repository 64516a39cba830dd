"""`pip install ./clients/python ./clients/python/pydantic_ai` into a fresh
virtual environment, offline, then the package imported from outside the
checkout: testsupport/adapter_install.py does it for every adapter; this
file names what is this adapter's (Countersign is a Pydantic AI capability)."""

from __future__ import annotations

import os
import unittest
from typing import Any

from adapter_install import AdapterInstall


class Install(AdapterInstall, unittest.TestCase):
    package_dir = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    module = "countersign_pydantic_ai"
    dist = "countersign-pydantic-ai"
    install = "countersign-pydantic-ai"
    framework = "pydantic_ai"
    framework_label = "pydantic-ai-slim"
    framework_requirement = "pydantic-ai-slim<3,>=2.62"
    probe = (
        "from countersign_pydantic_ai import Countersign, ResumeRefused, current_execution\n"
        "from pydantic_ai.capabilities import AbstractCapability\n"
        "extra = issubclass(Countersign, AbstractCapability)\n"
    )

    def check_extra(self, extra: Any) -> None:
        self.assertTrue(extra)


if __name__ == "__main__":
    unittest.main()
