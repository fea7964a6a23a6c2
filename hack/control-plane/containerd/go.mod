// Builds containerd 2.x and its runc shim (the real node's container runtime) from the Go module proxy.
module netaware.local/control-plane/containerd

go 1.26.6

require github.com/containerd/containerd/v2 v2.4.2 // indirect
