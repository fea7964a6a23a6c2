//go:build tools

// Package tools pins the kwok command build.sh compiles.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
