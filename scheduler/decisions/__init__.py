"""Decisions: pure functions of what was read (who owns what, what to do for a job, cluster
health, admission, failover steps, ...). No store, no cluster, no clock, no ZooKeeper, no Ray."""
