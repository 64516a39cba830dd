"""The client installs from this repository into a clean virtual
environment, offline, and works from outside the source tree.

pip builds the wheel from pyproject.toml with the setuptools that .venv
holds (pinned with hashes in requirements.lock; --no-build-isolation, so
nothing is downloaded), then installs it with --no-index into a virtual
environment made afresh with `python -m venv`: no index, no find-links, so
a runtime dependency would fail the install. The installed package is then
imported there, from a folder outside the checkout, and checked: version,
its files under that environment, py.typed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.abspath(os.path.join(HERE, ".."))


def clean_env() -> Dict[str, str]:
    """The environment without pip's configuration (an index, find-links, a
    config file) or a PYTHONPATH that could reach this checkout."""
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


class Install(unittest.TestCase):
    def setUp(self) -> None:
        try:
            import setuptools  # noqa: F401
        except ImportError:
            msg = "setuptools is not in this environment: build .venv from requirements.lock (make python-env)"
            if os.environ.get("CI"):
                self.fail(msg)
            self.skipTest(msg)
        self.tmp = tempfile.mkdtemp(prefix="countersign-py-install-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def test_pip_install_into_a_fresh_venv(self) -> None:
        # A copy of the package's files, so that the build leaves nothing in
        # the checkout (build/, *.egg-info) and runs beside other tests.
        src = os.path.join(self.tmp, "src")
        os.mkdir(src)
        for name in ("pyproject.toml", "README.md"):
            shutil.copy(os.path.join(SOURCE, name), src)
        shutil.copytree(os.path.join(SOURCE, "countersign"), os.path.join(src, "countersign"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        wheels = os.path.join(self.tmp, "wheels")
        run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "--no-build-isolation",
             "--wheel-dir", wheels, src], cwd=self.tmp)
        built = os.listdir(wheels)
        self.assertEqual(len(built), 1, built)
        self.assertTrue(built[0].startswith("countersign-0.2.1-py3-none-any"), built)

        venv = os.path.join(self.tmp, "venv")
        run([sys.executable, "-m", "venv", venv], cwd=self.tmp)
        py = os.path.join(venv, "bin", "python")
        run([py, "-m", "pip", "install", "--no-index", os.path.join(wheels, built[0])], cwd=self.tmp)

        # -I: isolated, so neither this checkout nor a PYTHONPATH nor the
        # user's site can answer the import; run from a folder of its own.
        outside = os.path.join(self.tmp, "elsewhere")
        os.mkdir(outside)
        probe = (
            "import json, importlib.metadata as md, os, countersign\n"
            "from countersign import Client, Pacing, ServerExecuted, gated\n"
            "from countersign.toolgate import ToolGate\n"
            "d = md.distribution('countersign')\n"
            "pkg = os.path.dirname(countersign.__file__)\n"
            "print(json.dumps({'version': countersign.__version__, 'dist': d.version, 'file': countersign.__file__,\n"
            "  'typed': os.path.isfile(os.path.join(pkg, 'py.typed')), 'requires': d.requires,\n"
            "  'client': Client('http://127.0.0.1:1', 'k').base_url}))\n"
        )
        out = run([py, "-I", "-c", probe], cwd=outside)
        got = json.loads(out.stdout)
        self.assertEqual(got["version"], "0.2.1")
        self.assertEqual(got["dist"], "0.2.1")
        self.assertTrue(os.path.realpath(got["file"]).startswith(os.path.realpath(venv)), got["file"])
        self.assertTrue(got["typed"], "py.typed is installed (PEP 561)")
        self.assertIn(got["requires"], (None, []), "no runtime dependency")
        self.assertEqual(got["client"], "http://127.0.0.1:1")
        # And pip knows it as installed, with nothing missing.
        run([py, "-m", "pip", "check"], cwd=outside)


if __name__ == "__main__":
    unittest.main()
