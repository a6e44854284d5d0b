"""The composition root: wires ``scheduler`` (actors, store, backends) and ``api`` into a node
process (``drover.node``) and the ``drover`` command line (``drover.cli.main``). Nothing in
``scheduler`` or ``api`` imports this package."""
