"""The office as a server: the client protocol, the screens it keeps, the socket."""
