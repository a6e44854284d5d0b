"""Operations over many jobs, persisted and executed item by item (failover first).

``model`` (pure: states, records, the executor's pool slot), ``failover`` (pure: the plan and the
item step machine), ``auto`` (pure: when a group fails over by itself), ``executor`` (I/O: the
loop body that claims operations and advances their items through fenced store writes).
"""
