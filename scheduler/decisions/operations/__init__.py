"""Operations over many jobs, persisted and executed item by item (failovers, bulk operations).

Pure: ``model`` (the item machine every kind shares, the executor's choices), ``failover`` (the
plan and the item step machine of a failover), ``bulk`` (those of a bulk start, stop or
restart), ``auto`` (when a group fails over by itself). Their records are words of
``scheduler.core.operations``; the executor that applies their decisions through the operations
ledger is ``scheduler.loops.operations``.
"""
