"""The VT emulator the office keeps for each pane and the app draws from (no Textual here)."""
