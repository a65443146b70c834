"""Novel-API benchmark: programs that must call a target library API, and their failure classes."""
