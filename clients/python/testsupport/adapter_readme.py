"""What every adapter package's README test does, once: the README's
example (the python block between <!-- example --> and <!-- /example -->)
run as it is written against the demo (`countersign serve` without
--config), in a process of its own that imports the client and the adapter
from this checkout. The test is bob, the human who approves (over HTTP) the
proposal the example prints; the example then prints Countersign's outcome
and the tool's answer, and the demo's worker has executed the call once.

An adapter's test mixes AdapterReadme into a unittest.TestCase and names
what differs: its folder, its short name and the line its example prints
for the tool's answer (see langgraph/tests/test_lg_readme.py)."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import tempfile
import threading

from server import Server

from countersign import Client

CLIENT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def example(package_dir: str) -> str:
    """The example block of the adapter's README.md."""
    with open(os.path.join(package_dir, "README.md")) as f:
        text = f.read()
    m = re.search(r"<!-- example -->\n```python\n(.*?)```\n<!-- /example -->", text, re.S)
    assert m, "README.md has no example block"
    return m.group(1)


class AdapterReadme:
    """The README test of one adapter; mixed into a unittest.TestCase."""

    #: The adapter's folder (clients/python/<adapter>).
    package_dir: str
    #: lg, oa, pai or adk: names the example's temporary folder.
    short: str
    #: The line the example prints for the tool's answer, after
    #: "Countersign says: succeeded".
    answer: str

    def test_example_runs_against_the_demo(self) -> None:
        server = Server(None)
        self.addCleanup(server.close)
        bob = Client(server.url, "ck_dev_bob")
        d = tempfile.mkdtemp(prefix=f"cs-{self.short}-readme-")
        path = os.path.join(d, "example.py")
        with open(path, "w") as f:
            f.write(example(self.package_dir))
        env = {**os.environ, "COUNTERSIGN_URL": server.url, "PYTHONPATH": os.pathsep.join([CLIENT, self.package_dir])}
        proc = subprocess.Popen([sys.executable, path], cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        lines: "queue.Queue[str]" = queue.Queue()
        assert proc.stdout is not None
        threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
        try:
            first = lines.get(timeout=120)
        except queue.Empty:
            proc.kill()
            self.fail("the example printed nothing: " + proc.communicate()[1])
        m = re.match(r"waiting for a decision on (prp_\w+): Refund 40 EUR to c_9$", first.strip())
        self.assertTrue(m, first + (proc.stderr.read() if proc.poll() is not None and proc.stderr else ""))
        assert m is not None
        pid = m.group(1)
        self.assertIn(f"/v1/proposals/{pid}/approve -H 'Authorization: Bearer ck_dev_bob'", lines.get(timeout=30))
        p = bob.get_proposal(pid)
        self.assertEqual((p["status"], p["requester"], p["requester_kind"]), ("pending", "alice", "agent"))
        self.assertEqual(bob.approve(pid, reason="README")["status"], "applied")
        self.assertEqual(proc.wait(timeout=120), 0, proc.stderr.read() if proc.stderr else "")
        rest = []
        while not lines.empty():
            rest.append(lines.get().rstrip("\n"))
        p = bob.get_proposal(pid)
        self.assertEqual(p["status"], "succeeded")
        self.assertEqual(rest[0], "Countersign says: succeeded")
        self.assertEqual(rest[1], self.answer, rest)
        self.assertEqual(p["outcome"]["result"], {"refunded": 40})
        events = [e for e in bob.proposal_events(pid) if e["type"] == "proposal.claimed"]
        self.assertEqual(len(events), 1, "the demo's worker executed it once")
