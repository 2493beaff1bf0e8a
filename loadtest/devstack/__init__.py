"""What tests and the other tools stand on: a whole stack of processes on private ports
(stack), a private Redis Cluster (cluster), a scripted buyer, the invariants checked after a
run, and an API made in process (scratch)."""
