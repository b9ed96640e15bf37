"""The office without a screen: agents, mail, memory, the team and the office process;
it never imports Textual. Its root modules are the foundation every package uses (the
layout, the file formats, the config, mail); the packages import them, never the other
way round (tests/unit/test_import_contracts.py)."""
