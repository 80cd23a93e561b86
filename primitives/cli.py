"""The ``primitives`` command."""

def main() -> None:
    raise SystemExit("not yet")
