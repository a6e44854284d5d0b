"""The end-to-end tests' watcher of a Spark master: :class:`harness.pollers.Poller`, which the
benches use too."""

from harness.pollers import Poller

__all__ = ["Poller"]
