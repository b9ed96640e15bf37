"""Agents: what each vendor's CLI is to the office: how it is launched, how its hooks talk
back, where its login and its token usage are (the CLIs while they run are desks/)."""
