"""One module per resource: its JSON API router and, where it has one, its page router."""
