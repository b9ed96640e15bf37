"""The event plane: hook frames in, decisions out (policy.py pure, plane.py effects,
server.py the socket)."""
