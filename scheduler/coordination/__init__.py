"""ZooKeeper: every call Drover makes to it (membership registration, group views, watches)."""
