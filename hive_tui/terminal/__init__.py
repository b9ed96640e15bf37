"""The panes: the widget that draws an agent's terminal and the keys it sends."""
