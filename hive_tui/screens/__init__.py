"""The modal screens: help, send a message, answer an escalation, confirm an action, a
task with its history."""
