"""kube-scheduler's default plugins as the engine models them (pure): what a pod asks of the cluster beyond its
node and its resources — inter-pod affinity and anti-affinity, topology spread, host ports — read once per pod
(:mod:`.terms`), counted once per cycle per topology domain (PreFilter), and checked per node in O(1) (Filter)."""
