"""Counts the calls that reach an upstream MCP server.

The Go test configures each reference server as
``python upstream_log.py LOG -- COMMAND...``: this script starts COMMAND
(the real server), hands it every line the gateway writes to it unchanged,
and appends to LOG one JSON line for each ``tools/call`` request among them:
the upstream's name (the environment variable COUNTERSIGN_UPSTREAM, which
the configuration sets), the tool, the arguments and the operation id the
gateway puts in ``_meta``. The server's answers go straight to the gateway
(its standard output is this process's). The MCP stdio transport is one
JSON-RPC message a line, so a line is a message.

Several processes (``countersign serve`` and each ``countersign mcp``) append
to the same LOG; each record is one write of one line to a file opened with
O_APPEND, so the records do not interleave.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # The server dies with this process, so that a gateway that kills its
    # upstream leaves no server behind.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def main() -> int:
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        print("usage: upstream_log.py LOG -- COMMAND...", file=sys.stderr)
        return 2
    log_path, command = sys.argv[1], sys.argv[3:]
    upstream = os.environ.get("COUNTERSIGN_UPSTREAM", "")
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    server = subprocess.Popen(command, stdin=subprocess.PIPE, preexec_fn=_die_with_parent)
    assert server.stdin is not None
    try:
        for line in sys.stdin.buffer:
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if isinstance(message, dict) and message.get("method") == "tools/call":
                params = message.get("params") or {}
                record = {
                    "upstream": upstream,
                    "tool": params.get("name"),
                    "arguments": params.get("arguments"),
                    "operation_id": (params.get("_meta") or {}).get("countersign.dev/operation_id"),
                }
                os.write(log, (json.dumps(record, sort_keys=True) + "\n").encode())
            server.stdin.write(line)
            server.stdin.flush()
    except BrokenPipeError:
        pass
    finally:
        try:
            server.stdin.close()
        except BrokenPipeError:
            pass
        os.close(log)
    return server.wait()


if __name__ == "__main__":
    sys.exit(main())
