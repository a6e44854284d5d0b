"""Checkpoint storage: the files of checkpoints under the clusters' storage roots."""
