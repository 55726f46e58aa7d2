"""The embedded Valkey started for you when no URL is given (found through its record in
the data dir), and a loopback Valkey Cluster from the same binary."""
