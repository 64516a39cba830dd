"""What every adapter package's install test does, once: `pip install
./clients/python ./clients/python/<adapter>` into a fresh virtual
environment, offline, then the package imported from outside the checkout.

Both wheels are built from this repository with the setuptools .venv holds
(--no-build-isolation: nothing downloaded) and installed with --no-index
from a folder holding only them. The framework is not downloaded either:
the fresh environment reaches the locked copies in .venv through a .pth
file, so pip resolves the adapter's requirements against exactly the
versions the tests ran with, and a requirement missing from them fails the
install. The client itself is not in .venv: it comes from its wheel.

An adapter's test mixes AdapterInstall into a unittest.TestCase and names
what differs: its folder, module, distribution, framework and a probe of
its public names (see langgraph/tests/test_lg_install.py)."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
from importlib import import_module
from typing import Any, Dict, List

CLIENT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


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


class AdapterInstall:
    """The install test of one adapter; mixed into a unittest.TestCase."""

    #: The adapter's folder (clients/python/<adapter>).
    package_dir: str
    #: Its import name (countersign_langgraph) and distribution
    #: (countersign-langgraph).
    module: str
    dist: str
    #: What pip installs: the distribution, with extras if any.
    install: str
    #: The framework's import name, its label in messages, and the start of
    #: the adapter's requirement on it ("langgraph<1.3,>=1.2").
    framework: str
    framework_label: str
    framework_requirement: str
    #: Lines of Python run in the fresh environment: imports of the
    #: adapter's public names, then `extra = …`, which the probe reports.
    probe: str

    def check_extra(self, extra: Any) -> None:
        """Checks what the probe's `extra` reported."""
        raise NotImplementedError

    def setUp(self) -> None:
        try:
            import setuptools  # noqa: F401

            import_module(self.framework)
        except ImportError:
            msg = f"setuptools or {self.framework_label} is not in this environment: build .venv from requirements.lock (make python-env)"
            if os.environ.get("CI"):
                self.fail(msg)
            self.skipTest(msg)
        self.tmp = tempfile.mkdtemp(prefix=f"cs-{self.module}-install-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def test_pip_install_into_a_fresh_venv(self) -> None:
        wheels = os.path.join(self.tmp, "wheels")
        for src, pkg in ((CLIENT, "countersign"), (self.package_dir, self.module)):
            copy = copy_package(src, os.path.join(self.tmp, "src", pkg), pkg)
            run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "--no-build-isolation", "--wheel-dir", wheels, copy], cwd=self.tmp)
        built = sorted(os.listdir(wheels))
        self.assertEqual(len(built), 2, built)
        self.assertTrue(built[1].startswith(f"{self.module}-0.1.1-py3-none-any"), built)

        venv = os.path.join(self.tmp, "venv")
        run([sys.executable, "-m", "venv", venv], cwd=self.tmp)
        py = os.path.join(venv, "bin", "python")
        target = run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=self.tmp).stdout.strip()
        with open(os.path.join(target, "locked-framework.pth"), "w") as f:
            f.write("\n".join(site.getsitepackages()) + "\n")
        run([py, "-m", "pip", "install", "--no-index", "--find-links", wheels, self.install], cwd=self.tmp)

        outside = os.path.join(self.tmp, "elsewhere")
        os.mkdir(outside)
        probe = (
            f"import json, importlib.metadata as md, os, countersign, {self.module} as adapter\n"
            + self.probe
            + f"d = md.distribution({self.dist!r})\n"
            "print(json.dumps({'version': adapter.__version__, 'file': adapter.__file__, 'client': countersign.__file__,\n"
            "  'client_version': countersign.__version__, 'requires': d.requires,\n"
            "  'typed': os.path.isfile(os.path.join(os.path.dirname(adapter.__file__), 'py.typed')),\n"
            "  'extra': extra}))\n"
        )
        got = json.loads(run([py, "-I", "-c", probe], cwd=outside).stdout)
        self.assertEqual((got["version"], got["client_version"]), ("0.1.1", "0.2.1"))
        for key in ("file", "client"):
            self.assertTrue(os.path.realpath(got[key]).startswith(os.path.realpath(venv)), got[key])
        self.assertTrue(got["typed"])
        self.check_extra(got["extra"])
        self.assertIn("countersign<0.3,>=0.2.1", got["requires"])
        self.assertTrue(any(r.startswith(self.framework_requirement) for r in got["requires"]), got["requires"])
        run([py, "-m", "pip", "check"], cwd=outside)
