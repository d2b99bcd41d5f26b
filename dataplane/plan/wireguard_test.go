package plan

import (
	"encoding/hex"
	"strings"
	"testing"
)

// TestKeys derives a public key with the X25519 vector of RFC 7748
// (section 6.1, Alice) and reads keys back from their base64 form.
func TestKeys(t *testing.T) {
	hexKey := func(s string) Key {
		t.Helper()
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		k, err := NewKey(b)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	priv := hexKey("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
	pub := hexKey("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
	if got := priv.PublicKey(); got != pub {
		t.Errorf("PublicKey() = %s, want %s", got, pub)
	}
	if k, err := ParseKey(pub.String()); err != nil || k != pub {
		t.Errorf("ParseKey(%s) = %s, %v", pub, k, err)
	}
	if _, err := ParseKey("not base64!"); err == nil {
		t.Error("ParseKey accepted a string that is not base64")
	}
	if _, err := NewKey(make([]byte, 31)); err == nil || !strings.Contains(err.Error(), "31 bytes") {
		t.Errorf("NewKey of 31 bytes: %v", err)
	}
}
