"""The command-line entry points declared in pyproject.toml: `tawa-opt` (xdsl-opt with the
tawa dialects, passes and the `ptx` target), `tawa-run` (a tile kernel in the interpreter),
`tawa-verify` (proves a lowered kernel's barrier protocol) and `tawa` (the compile, demo,
fuzz and repro subcommands)."""

import os
import sys

# What a shell reports for a writer killed by SIGPIPE (128 + 13).
CLOSED_PIPE_EXIT = 141


def stdout_closed() -> int:
    """The exit of a tool whose reader closed the pipe (`tawa compile ... | head`): stdout
    goes to /dev/null, so the interpreter's last flush raises nothing, and no traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return CLOSED_PIPE_EXIT
