"""The node's loops without Ray: each round observes through the adapters, decides with
``scheduler.decisions``, records through the store and acts through the backends."""
