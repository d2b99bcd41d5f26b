package images

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLocalName(t *testing.T) {
	const reg = "172.30.1.1:5000"
	for in, want := range map[string]string{
		AgentImage:                             reg + "/peerlink/peerlink-agent:latest",
		"registry.k8s.io/pause:3.10":           reg + "/pause:3.10",
		reg + "/lab/echo:latest":               reg + "/lab/echo:latest",
		"ghcr.io/org/deep/name@sha256:" + "00": reg + "/org/deep/name@sha256:00",
	} {
		if got := LocalName(in, reg); got != want {
			t.Errorf("LocalName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestHostClosure lists what a host program needs on another root: for
// iptables, the link chain to the program that acts on its name and the
// shared libraries it loads.
func TestHostClosure(t *testing.T) {
	const program = "/usr/sbin/iptables"
	if _, err := os.Stat(program); err != nil {
		t.Skipf("no %s here: %v", program, err)
	}
	files, err := hostClosure([]string{program}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, program) {
		t.Errorf("closure %v lacks %s", files, program)
	}
	var libc bool
	for _, f := range files {
		libc = libc || strings.Contains(filepath.Base(f), "libc.so")
	}
	if !libc || len(files) < 3 {
		t.Errorf("closure %v lacks the shared libraries", files)
	}
}
