"""The thin `hive`: a verb sent to the running office, which runs it (standard library only).

Nothing is imported here: `hive` imports the package on the way to `hive_client.client`,
on every call an agent makes, so the package itself must cost nothing.
"""
