import sys


def main() -> int:
    # Fail open: until the event plane lands, a hook does nothing and never blocks an agent.
    return 0


if __name__ == "__main__":
    sys.exit(main())
