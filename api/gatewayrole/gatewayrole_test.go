package gatewayrole

import "testing"

func TestParse(t *testing.T) {
	for _, r := range []Role{Server, Client} {
		if got, err := Parse(string(r)); err != nil || got != r {
			t.Errorf("Parse(%q) = %q, %v", r, got, err)
		}
	}
	for _, s := range []string{"", "Server", "peer"} {
		if got, err := Parse(s); err == nil || got != "" {
			t.Errorf("Parse(%q) = %q, %v; want an error", s, got, err)
		}
	}
	const want = `unknown role "peer": use server or client`
	if _, err := Parse("peer"); err == nil || err.Error() != want {
		t.Errorf("Parse(peer): %v; want %s", err, want)
	}
}
