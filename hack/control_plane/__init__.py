"""The loopback control plane the e2e tier and the live benchmarks run on (cluster.py), and its real nodes
(realnode.py); built by hack/control-plane/build.sh, started by hack/control-plane/up.sh."""
