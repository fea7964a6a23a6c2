// CoreDNS with only the plugins the real node tier's Corefile uses (hack/control_plane/cluster.py): bind, errors,
// cache and kubernetes, in CoreDNS's own order (its plugin.cfg). CoreDNS's own main package compiles every plugin
// (the cloud providers' DNS, the tracers, etcd, ...), none of which the tier uses: a cold build's time, not a feature.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
)

func init() {
	dnsserver.Directives = []string{"bind", "errors", "cache", "kubernetes"}
}

func main() {
	coremain.Run()
}
