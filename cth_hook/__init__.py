"""The hook shim agent CLIs run on every hook event (standard library only)."""
