// Command grafana-dashboard-check decodes Grafana dashboard JSON files strictly against the
// dashboard schema of the Grafana Foundation SDK (generated from Grafana's own schemas), with
// the panel options and data queries of Grafana's built-in plugins: an unknown field, a value
// of the wrong type or a panel option its plugin does not have is an error naming its path.
//
// Usage: grafana-dashboard-check FILE...; exit status 0 when every file decodes, 1 otherwise
// (each error on a line of its own, prefixed with the file), 2 on wrong usage.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: grafana-dashboard-check FILE...")
		os.Exit(2)
	}
	plugins.RegisterDefaultPlugins()
	failed := false
	for _, path := range os.Args[1:] {
		raw, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			failed = true
			continue
		}
		var board dashboard.Dashboard
		if err := board.UnmarshalJSONStrict(raw); failure(err) {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			failed = true
			continue
		}
		fmt.Printf("%s: dashboard %q, %d panels: ok\n", path, deref(board.Title), len(board.Panels))
	}
	if failed {
		os.Exit(1)
	}
}

// failure tells a decoding error from success: the SDK returns its error list even when it
// is empty, as a non-nil error that holds no error.
func failure(err error) bool {
	var listed cog.BuildErrors
	if errors.As(err, &listed) {
		return len(listed) > 0
	}
	return err != nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
