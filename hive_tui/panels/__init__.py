"""The panels beside the panes: the board, the log, the tasks, the inbox, memory, and the
worktree diff."""
