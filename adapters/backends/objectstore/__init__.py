"""Object stores behind one Protocol: a local directory (embedded default) and S3."""
