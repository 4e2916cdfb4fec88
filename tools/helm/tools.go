//go:build tools

// Package tools names the commands this module builds, so that `go mod tidy` keeps them.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
