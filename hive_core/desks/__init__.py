"""Desks: the roster's agent CLIs while they run, each in its own pty: starting and
stopping them (supervisor), the pty and how text is typed into it, containment, the
guard that ends their sessions with the office, what they leave behind, and what the
office knows of each while it runs (state). What a vendor's CLI is lives in agents/."""
