package version

import (
	"fmt"
	"io"
)

// Report is what `peerlink version` prints: this build and the version the
// cluster's controller publishes.
type Report struct {
	Client Info `json:"clientVersion"`
	// Controller is nil when only this build's version is asked for.
	Controller *ControllerVersion `json:"controllerVersion,omitempty"`
}

// ControllerVersion is what the controller publishes of its build.
type ControllerVersion struct {
	// Version is empty when the controller publishes none.
	Version string `json:"version"`
}

// WriteSummary prints the report for a human; source names where the
// controller publishes its version.
func (r Report) WriteSummary(w io.Writer, source string) {
	fmt.Fprintf(w, "Client Version: %s\n", r.Client)
	if r.Controller == nil {
		return
	}
	if r.Controller.Version == "" {
		fmt.Fprintf(w, "Controller Version: unknown (its %s names none)\n", source)
		return
	}
	fmt.Fprintf(w, "Controller Version: %s\n", r.Controller.Version)
}
