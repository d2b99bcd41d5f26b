package main

import (
	"bytes"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/peerlink/peerlink/internal/version"
)

// TestChoiceFlags parses each value of the gateway's flags that take one of
// a few, and one value each does not take.
func TestChoiceFlags(t *testing.T) {
	valid := []string{"--name=x", "--namespace=y", "--remote-cluster-id=z", "--mode=server", "--listen-port=51840", "--local-cidr=10.244.0.0/16"}
	for _, tc := range []struct {
		flag   string
		values []string
		bad    string
	}{
		{"mode", []string{"server", "client"}, "both"},
		{"overlay", []string{"auto", "geneve", "vxlan"}, "gre"},
		{"wireguard-implementation", []string{"auto", "kernel", "userspace"}, "boringtun"},
	} {
		for _, v := range append(slices.Clone(tc.values), tc.bad) {
			var f gatewayFlags
			fs := pflag.NewFlagSet("gateway", pflag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f.addFlags(fs)
			if err := fs.Parse(append(slices.Clone(valid), "--"+tc.flag+"="+v)); err != nil {
				t.Fatal(err)
			}
			o, err := f.options()
			if v == tc.bad {
				if err == nil || !strings.HasPrefix(err.Error(), "--"+tc.flag+": ") || !strings.Contains(err.Error(), strings.Join(tc.values[:len(tc.values)-1], ", ")) {
					t.Errorf("--%s=%s: error %v, want one naming the flag and its values", tc.flag, v, err)
				}
				continue
			}
			got := map[string]string{"mode": string(o.Role), "overlay": string(o.Overlay), "wireguard-implementation": string(o.WireGuard)}[tc.flag]
			if err != nil || got != v {
				t.Errorf("--%s=%s: %q, %v", tc.flag, v, got, err)
			}
		}
	}
}

func TestCommaList(t *testing.T) {
	if got := commaList(" a, ,b,"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("commaList = %q, want a and b", got)
	}
	if got := commaList(""); got != nil {
		t.Errorf("commaList of nothing = %q", got)
	}
}

// TestVersionFlag prints the version, commit and Go version of the build
// and runs nothing else.
func TestVersionFlag(t *testing.T) {
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"--version"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if want := "peerlink-agent " + version.Get().String() + "\n"; out.String() != want {
		t.Errorf("--version printed %q, want %q", out.String(), want)
	}
	if !strings.Contains(out.String(), runtime.Version()) {
		t.Errorf("--version printed %q, without the Go version", out.String())
	}
}
