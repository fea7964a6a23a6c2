"""What the planner's steps cost, in nanoseconds of work of an idle reference machine: a plan's budget is counted
in this work, not in wall time, so one budget gives the same plan on an idle and on a busy machine."""

# The search's work, counted in nanoseconds of an idle reference machine (2 cores, measured with bench_plan): one
# evaluation of a pod on every node (or of the objective) costs CALL_WORK + NODE_WORK per node (CALL_WORK alone when
# its workload's network cost is already computed), so a budget counted in work gives the same plan on an idle and
# on a busy machine
CALL_WORK, NODE_WORK = 19_000, 6
# Besides (measured in CPU time on the reference machine, on bench_plan's random DAG on 16 nodes and its 1,000-pod
# families on 5,000 nodes, each as a per-call and a per-node part: a search charged for node_costs alone ran 2.7
# times its budget there, and 7 times on 36 pods): a pod put on or taken off a node (its counts, its node's
# resources, its neighbours' kept costs); the nodes a pod fits on (every resource column, the bandwidth); a node's
# room; the best node among those (the minimum, the ties); a swap's delta (two single-node fits, four pair costs);
# one node checked for one pod
PUT_WORK, FITS_WORK, ROOM_WORK, BEST_WORK, SWAP_WORK, FIT_ONE_WORK = 9_000, 30_000, 10_000, 30_000, 25_000, 5_000
EDGE_WORK = 40_000  # the objective's, per dependency edge (NODE_WORK per node besides)
BUILD_WORK = 3_000  # per node: a plan's problem built from the cluster's index and its report, charged to its budget
PACK_WORK = 75  # per configuration and node: the packed start's first fit (measured in CPU time likewise)
