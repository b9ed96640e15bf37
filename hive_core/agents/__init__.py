"""Agents: how each provider's CLI is launched and talks back, and the ptys they run in."""
