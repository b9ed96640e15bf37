"""The office floor map: the plan and its stations (pure) and the widget that draws it."""
