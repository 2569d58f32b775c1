"""The cluster's records in a coordinator: opening one by URL, typed reads and writes, and
a home's configuration as the cluster gives it."""
