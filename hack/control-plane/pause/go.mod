// The real node's sandbox ("pause") image: a process that holds a pod's namespaces until it is told to stop.
module netaware.local/control-plane/pause

go 1.26.0
