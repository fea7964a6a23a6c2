// Builds the CNI plugins the real node uses (bridge, host-local, loopback, portmap, bandwidth) from the Go module proxy.
module netaware.local/control-plane/cni-plugins

go 1.26.0

require github.com/containernetworking/plugins v1.9.1 // indirect
