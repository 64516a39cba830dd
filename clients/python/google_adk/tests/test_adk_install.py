"""`pip install ./clients/python ./clients/python/google_adk` into a fresh
virtual environment, offline, then the package imported from outside the
checkout.

Both wheels are built from this repository with the setuptools .venv holds
(--no-build-isolation: nothing downloaded) and installed with --no-index
from a folder holding only them. The framework (google-adk, google-genai
and theirs) is not downloaded either: the fresh environment
reaches the locked copies in .venv through a .pth file, so pip resolves the
adapter's requirements against exactly the versions the tests ran with, and
a requirement missing from them fails the install. The client itself is
not in .venv: it comes from its wheel."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
import unittest
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.abspath(os.path.join(HERE, ".."))
CLIENT = os.path.abspath(os.path.join(HERE, "..", ".."))


def clean_env() -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_INPUT"] = "1"
    return env


def run(args: List[str], cwd: str) -> subprocess.CompletedProcess:
    out = subprocess.run(args, cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {out.returncode}:\n{out.stdout}\n{out.stderr}")
    return out


def copy_package(src: str, dst: str, pkg: str) -> str:
    """The package's files in a folder of their own, so that the build
    leaves nothing (build/, *.egg-info) in the checkout."""
    os.makedirs(dst)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(src, name), dst)
    shutil.copytree(os.path.join(src, pkg), os.path.join(dst, pkg), ignore=shutil.ignore_patterns("__pycache__"))
    return dst


class Install(unittest.TestCase):
    def setUp(self) -> None:
        try:
            import google.adk  # noqa: F401
            import setuptools  # noqa: F401
        except ImportError:
            msg = "setuptools or google-adk is not in this environment: build .venv from requirements.lock (make python-env)"
            if os.environ.get("CI"):
                self.fail(msg)
            self.skipTest(msg)
        self.tmp = tempfile.mkdtemp(prefix="cs-adk-install-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def test_pip_install_into_a_fresh_venv(self) -> None:
        wheels = os.path.join(self.tmp, "wheels")
        for src, pkg in ((CLIENT, "countersign"), (PKG, "countersign_google_adk")):
            copy = copy_package(src, os.path.join(self.tmp, "src", pkg), pkg)
            run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "--no-build-isolation", "--wheel-dir", wheels, copy], cwd=self.tmp)
        built = sorted(os.listdir(wheels))
        self.assertEqual(len(built), 2, built)
        self.assertTrue(built[1].startswith("countersign_google_adk-0.1.0-py3-none-any"), built)

        venv = os.path.join(self.tmp, "venv")
        run([sys.executable, "-m", "venv", venv], cwd=self.tmp)
        py = os.path.join(venv, "bin", "python")
        target = run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=self.tmp).stdout.strip()
        with open(os.path.join(target, "locked-framework.pth"), "w") as f:
            f.write("\n".join(site.getsitepackages()) + "\n")
        run([py, "-m", "pip", "install", "--no-index", "--find-links", wheels, "countersign-google-adk"], cwd=self.tmp)

        outside = os.path.join(self.tmp, "elsewhere")
        os.mkdir(outside)
        probe = (
            "import json, importlib.metadata as md, os, countersign, countersign_google_adk as cl\n"
            "from countersign_google_adk import GatedTool, action_tool, confirm, gated, pending_confirmations\n"
            "from google.adk.tools.function_tool import FunctionTool\n"
            "d = md.distribution('countersign-google-adk')\n"
            "print(json.dumps({'version': cl.__version__, 'file': cl.__file__, 'client': countersign.__file__,\n"
            "  'client_version': countersign.__version__, 'requires': d.requires,\n"
            "  'typed': os.path.isfile(os.path.join(os.path.dirname(cl.__file__), 'py.typed')),\n"
            "  'function_tool': issubclass(GatedTool, FunctionTool)}))\n"
        )
        got = json.loads(run([py, "-I", "-c", probe], cwd=outside).stdout)
        self.assertEqual((got["version"], got["client_version"]), ("0.1.0", "0.2.0"))
        for key in ("file", "client"):
            self.assertTrue(os.path.realpath(got[key]).startswith(os.path.realpath(venv)), got[key])
        self.assertTrue(got["typed"])
        self.assertTrue(got["function_tool"])
        self.assertIn("countersign<0.3,>=0.2", got["requires"])
        self.assertTrue(any(r.startswith("google-adk<2.14,>=2.13") for r in got["requires"]), got["requires"])
        run([py, "-m", "pip", "check"], cwd=outside)


if __name__ == "__main__":
    unittest.main()
