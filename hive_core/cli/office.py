def main() -> None:
    raise SystemExit("hive-office: not built yet")
