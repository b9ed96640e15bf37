"""The hook shim agent CLIs run on every hook event (standard library only).

Nothing is imported here: every hook event starts a fresh interpreter, and the package
is imported on the way to `cth_hook.__main__`.
"""
