"""Coordinator backends behind one Protocol (``nereus.coordination.Coordinator``).

``sqlite`` is the embedded default: one host, no servers, the store in the home.
``etcd`` runs on an etcd v3 server (``etcd://HOST:PORT/CLUSTER``), for clusters across hosts.
"""
