"""The ``drover`` command line: one module per group of commands."""
