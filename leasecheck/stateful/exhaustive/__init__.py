"""Small scopes searched whole: every program of a few moves, not a sample of them."""
