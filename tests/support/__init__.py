"""The tests' own support package: private ZooKeeper servers and node-process conveniences."""
