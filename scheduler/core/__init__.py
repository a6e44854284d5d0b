"""The words every layer shares: errors, states, records, the ownership rule, the contracts the
adapters implement (a cluster backend, the ledger), logs and metrics. No I/O of its own; imports
nothing of the scheduler above it."""
