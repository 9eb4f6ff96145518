"""The package itself: submission.py, reference.py, the scripts, tools/, the layout and the layering."""
