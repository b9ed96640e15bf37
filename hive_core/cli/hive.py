def main() -> None:
    raise SystemExit("hive: not built yet")
