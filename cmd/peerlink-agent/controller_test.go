package main

import (
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// runControllerArgs runs `peerlink-agent controller` with args and returns
// its error; only invalid flags are given, so it never gets to connecting.
func runControllerArgs(t *testing.T, args ...string) error {
	t.Helper()
	cmd := newControllerCommand()
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SilenceUsage = true
	return cmd.Execute()
}

func TestControllerFlagValidation(t *testing.T) {
	valid := []string{"--cluster-id=alpha", "--pod-cidr=10.244.0.0/16", "--service-cidr=10.96.0.0/12"}
	for _, tc := range []struct {
		name string
		args []string
		want []string // substrings of the error
	}{
		{
			name: "pod and external overlap",
			args: []string{"--cluster-id=alpha", "--pod-cidr=10.64.0.0/10", "--service-cidr=10.96.0.0/12", "--external-cidr=10.70.0.0/16"},
			want: []string{"--pod-cidr 10.64.0.0/10", "overlaps", "--external-cidr 10.70.0.0/16"},
		},
		{
			name: "reserved inside service",
			args: append(slices.Clone(valid), "--reserved-cidr=192.168.0.0/24,10.100.0.0/16"),
			want: []string{"--service-cidr 10.96.0.0/12", "--reserved-cidr 10.100.0.0/16"},
		},
		{
			name: "missing cluster id",
			args: []string{"--pod-cidr=10.244.0.0/16", "--service-cidr=10.96.0.0/12"},
			want: []string{"--cluster-id is required"},
		},
		{
			name: "missing pod and service cidrs",
			args: []string{"--cluster-id=alpha"},
			want: []string{"--pod-cidr is required", "--service-cidr is required"},
		},
		{
			name: "invalid cidr",
			args: append(slices.Clone(valid), "--internal-cidr=10.80.0.0/33"),
			want: []string{"--internal-cidr", "10.80.0.0/33"},
		},
		{
			name: "host bits",
			args: []string{"--cluster-id=alpha", "--pod-cidr=10.244.1.0/16", "--service-cidr=10.96.0.0/12"},
			want: []string{"--pod-cidr", "host bits set", "10.244.0.0/16"},
		},
		{
			name: "overlapping pools",
			args: append(slices.Clone(valid), "--ipam-pool=10.0.0.0/8,10.1.0.0/16"),
			want: []string{"--ipam-pool", "overlaps"},
		},
		{
			name: "positional argument",
			args: append(slices.Clone(valid), "extra"),
			want: []string{"unknown command"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := runControllerArgs(t, tc.args...)
			if err == nil {
				t.Fatalf("controller %v: no error", tc.args)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("controller %v: error %q does not contain %q", tc.args, err, w)
				}
			}
		})
	}
}

func TestControllerFacts(t *testing.T) {
	var o controllerOptions
	fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse([]string{
		"--cluster-id=alpha", "--pod-cidr=10.244.0.0/16", "--pod-cidr=10.245.0.0/16,10.246.0.0/16",
		"--service-cidr=10.96.0.0/12", "--reserved-cidr=", "--namespace=net",
	}); err != nil {
		t.Fatal(err)
	}
	facts, err := o.facts()
	if err != nil {
		t.Fatalf("facts: %v", err)
	}
	if facts.ClusterID != "alpha" || facts.Namespace != "net" {
		t.Errorf("cluster ID %q, namespace %q", facts.ClusterID, facts.Namespace)
	}
	wantPods := []netip.Prefix{
		netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.245.0.0/16"), netip.MustParsePrefix("10.246.0.0/16"),
	}
	if !slices.Equal(facts.PodCIDRs, wantPods) {
		t.Errorf("pod CIDRs %v, want %v", facts.PodCIDRs, wantPods)
	}
	if facts.ExternalCIDR.String() != "10.70.0.0/16" || facts.InternalCIDR.String() != "10.80.0.0/16" {
		t.Errorf("default external %s and internal %s", facts.ExternalCIDR, facts.InternalCIDR)
	}
	if len(facts.ReservedCIDRs) != 0 || len(facts.Pools) != 0 {
		t.Errorf("reserved %v and pools %v, want none", facts.ReservedCIDRs, facts.Pools)
	}
}
