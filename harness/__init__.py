"""Development harness shared by the benches and the tests (never imported by Drover itself).

- ``harness.nodes``: real Drover node processes (start, stop, kill -9, freeze, thaw) and free ports;
- ``harness.pollers``: a look at a cluster taken in a thread every few tenths of a second while a
  test or a bench acts;
- ``harness.procs``: a reader of ``/proc`` (sessions, environments, command lines);
- ``harness.simcluster``: the simulated Spark standalone cluster for benches at a scale this machine
  cannot run for real.
"""
