"""Cluster metadata as a log of records: the records, and the image they replay into."""
