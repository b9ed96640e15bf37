"""The office on screen: a Textual app over hive_core (which never imports Textual).

app.py          HiveApp: layouts, keys, focus, the Office running as workers
bridge.py       the seam: Office events -> Textual messages
messages.py     the messages widgets and the app exchange
terminal/       the VT emulator adapter, key encoding, the TerminalPane widget
map/            the floor plan (pure layout) and the OfficeMap widget
panels/         Board, Log, Tasks, Inbox side-panel tabs
screens/        help, send-a-message
"""

# The screen's frame: Textual paints at most 60 a second, so a pane repaints and the
# bridge reloads a panel no more often, and typing echoes within one.
FRAME_S = 1 / 60
