"""Desks on other machines, reached over OpenSSH (issue 17; docs/remote.md).

ssh.py: the ssh command lines (pure); plan.py: a remote launch (pure); launch.py: its
effects; relay.py: a desk's `hive` verbs that run in a process of their own; check.py and
setup.py: doctor's probe and `hive-office remote-setup`.
"""
