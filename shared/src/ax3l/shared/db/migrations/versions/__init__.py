"""Ax3l's schema revisions, oldest first: each one file, never edited once released."""
