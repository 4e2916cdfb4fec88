// A strict check of the Grafana dashboard in deploy/monitoring, against the dashboard schema of
// the Grafana Foundation SDK (Apache-2.0), built from its published Go module.
module llmscaler.dev/tools/grafana

go 1.21

require github.com/grafana/grafana-foundation-sdk/go v0.0.22
