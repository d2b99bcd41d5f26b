package proc

import (
	"os"
	"slices"
	"testing"
)

func TestPids(t *testing.T) {
	pids, err := Pids()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pids, os.Getpid()) {
		t.Errorf("Pids() = %v: misses the test's own process %d", pids, os.Getpid())
	}
}
