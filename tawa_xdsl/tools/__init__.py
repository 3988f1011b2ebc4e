"""The command-line entry points declared in pyproject.toml: `tawa-opt` (xdsl-opt with the
tawa dialects, passes and the `ptx` target), `tawa-run` (a tile kernel in the interpreter),
`tawa-verify` (proves a lowered kernel's barrier protocol) and `tawa` (the compile, demo,
fuzz and repro subcommands)."""
