"""The event plane: hook frames in, decisions out (policy.py pure, plane.py effects,
hook_socket.py the socket)."""
