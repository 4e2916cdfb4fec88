//go:build tools

// Package tools names the commands this module builds, so that `go mod tidy` keeps them.
package tools

import (
	_ "github.com/kedacore/keda/v2/cmd/adapter"
	_ "github.com/kedacore/keda/v2/cmd/operator"
)
