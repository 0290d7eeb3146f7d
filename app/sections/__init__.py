"""The explorer's sections: each ``render(...)`` draws one tab from widgets and cached calls."""
