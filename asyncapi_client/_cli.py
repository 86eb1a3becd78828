"""The asyncapi-client command line (in progress)."""


def main() -> int:
    return 0
