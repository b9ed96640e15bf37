"""Desks on other machines, reached over OpenSSH (issue 17; docs/remote.md).

ssh.py: the ssh command lines (pure). The rest of the package is added per concern:
the desk's launch and reconnects, the office's relay of `hive` verbs, doctor and setup.
"""
