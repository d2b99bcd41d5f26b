package field

import (
	"errors"
	"fmt"
	"testing"
)

// TestWithFlags names the fields of plain and joined Errors by the names
// given, and keeps other errors and fields without a name as they are.
func TestWithFlags(t *testing.T) {
	names := map[string]string{"InfoFile": "--cluster-info", "Routed": "--routed-peer-cidr"}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{New("InfoFile", "a.yaml", errors.New("no such file")), "--cluster-info a.yaml: no such file"},
		{New("Routed", "", errors.New("bad")), "--routed-peer-cidr: bad"},
		{New("Allowed", "", errors.New("bad")), "Allowed: bad"},
		{errors.Join(New("Routed", "", errors.New("a")), errors.New("b")), "--routed-peer-cidr: a\nb"},
		{fmt.Errorf("wrapped: %w", New("Routed", "", errors.New("a"))), "wrapped: Routed: a"},
		{errors.New("other"), "other"},
	} {
		if got := WithFlags(tc.err, names).Error(); got != tc.want {
			t.Errorf("WithFlags(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// A conflict names both fields, each mapped to its flag, and nil stays nil.
func TestConflictWithFlags(t *testing.T) {
	err := Conflict("PodCIDRs", "10.64.0.0/10", "overlaps", "ExternalCIDR", "10.70.0.0/16", "local ranges must be disjoint")
	got := WithFlags(err, map[string]string{"PodCIDRs": "--pod-cidr", "ExternalCIDR": "--external-cidr"})
	const want = "--pod-cidr 10.64.0.0/10: overlaps --external-cidr 10.70.0.0/16: local ranges must be disjoint"
	if got.Error() != want {
		t.Errorf("WithFlags = %q, want %q", got, want)
	}
	if WithFlags(nil, nil) != nil {
		t.Error("WithFlags(nil) is not nil")
	}
}
