"""The command line: `hive` (agents and people) and the core's `hive-office` verbs, an
adapter over the office: a verb's logic lives in its domain, not here."""
