"""The team's rules: the task ledger, the morning standup, the manager's floor digest,
escalations to the person, hiring a desk, and waking a desk when its mail arrives."""
