"""The event plane: hook frames in, decisions out (decide.py pure, plane.py effects,
server.py the socket)."""
