package labctl

import (
	"fmt"
	"strconv"
	"strings"
)

// Metrics ports of peerlink's pods: the controller's and the fabric
// agent's as the install bundle sets them, a gateway's as the default
// gateway templates set it.
const (
	ControllerMetricsPort = 8080
	FabricMetricsPort     = 6093
	GatewayMetricsPort    = 8082
)

// MetricsPath is the path, on a cluster's API server, of the metrics that
// pod ns/name serves on port, through the API server's proxy.
func MetricsPath(ns, name string, port int) string {
	return fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:%d/proxy/metrics", ns, name, port)
}

// ParseMetrics reads the Prometheus text format: each sample by its name
// and labels as exposed, name{labels}. Comments and samples whose value is
// not a number are left out.
func ParseMetrics(out []byte) map[string]float64 {
	m := map[string]float64{}
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m
}
