"""The event plane: hook frames in, decisions out (decide.py pure, server.py effects)."""
