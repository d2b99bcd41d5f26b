package peering

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/manifests"
)

// TestPeerMTU checks what `peerlink info peer` says of the MTU the peer's
// gateway announces: the value, the MTUMismatch condition's message while
// it is True, and that it is unknown while the Connection has none.
func TestPeerMTU(t *testing.T) {
	const message = "this gateway's tunnel MTU is 1340 bytes, the peer's gateway announces 1400"
	conn := func(peerMTU int32, mismatch metav1.ConditionStatus) *netv1beta1.Connection {
		c := &netv1beta1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "gw-peer"}}
		c.Status.Value, c.Status.PeerMTU = netv1beta1.Connected, peerMTU
		if mismatch != "" {
			c.Status.Conditions = []metav1.Condition{{Type: netv1beta1.ConditionMTUMismatch, Status: mismatch, Message: message}}
		}
		return c
	}
	for _, tc := range []struct {
		name     string
		conn     *netv1beta1.Connection
		want     string
		json     []string
		notJSON  string
		notWants string
	}{
		{"mismatch", conn(1400, metav1.ConditionTrue), "Peer MTU: 1400 (mismatch: " + message + ")", []string{`"peerMTU": 1400`, `"mtuMismatch": "` + message + `"`}, "", ""},
		{"same", conn(1340, metav1.ConditionFalse), "Peer MTU: 1340", []string{`"peerMTU": 1340`}, "mtuMismatch", "mismatch"},
		{"unknown", conn(0, ""), "Peer MTU: unknown (", nil, "peerMTU", "mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := PeerInfo{ClusterID: "peer", Connection: connectionInfo(tc.conn)}
			var b bytes.Buffer
			p.WriteSummary(&b)
			// The columns widen with the longest label: compare with the
			// spaces collapsed.
			flat := strings.Join(strings.Fields(b.String()), " ")
			if !strings.Contains(flat, tc.want) || (tc.notWants != "" && strings.Contains(flat, tc.notWants)) {
				t.Errorf("summary: want %q (and no %q):\n%s", tc.want, tc.notWants, b.String())
			}
			doc, err := Encode(p.Connection, manifests.FormatJSON, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.json {
				if !strings.Contains(string(doc), want) {
					t.Errorf("JSON %s lacks %s", doc, want)
				}
			}
			if tc.notJSON != "" && strings.Contains(string(doc), tc.notJSON) {
				t.Errorf("JSON %s has %s", doc, tc.notJSON)
			}
		})
	}
}

// TestPeerView: info peer shows, beside how this cluster reaches the
// peer, how the peer reaches this cluster, as its gateway announced it.
func TestPeerView(t *testing.T) {
	c := &netv1beta1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "gw-peer"}}
	c.Status.Value = netv1beta1.Connected
	p := PeerInfo{ClusterID: "peer", Connection: connectionInfo(c)}
	var b bytes.Buffer
	p.WriteSummary(&b)
	if flat := strings.Join(strings.Fields(b.String()), " "); !strings.Contains(flat, "Seen by the peer: unknown (") {
		t.Errorf("summary without a view:\n%s", b.String())
	}

	c.Status.PeerView = []netv1beta1.PeerRangeView{{CIDR: "10.244.0.0/16", SeenAs: "10.71.0.0/16"}, {CIDR: "10.70.0.0/16", SeenAs: "10.70.0.0/16"}}
	p.Connection = connectionInfo(c)
	b.Reset()
	p.WriteSummary(&b)
	if flat := strings.Join(strings.Fields(b.String()), " "); !strings.Contains(flat, "Seen by the peer: 10.244.0.0/16 -> 10.71.0.0/16, 10.70.0.0/16") {
		t.Errorf("summary with a view:\n%s", b.String())
	}
	doc, err := Encode(p, manifests.FormatJSON, "connection.peerView")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), `"remapped": "10.71.0.0/16"`) {
		t.Errorf("info peer --get connection.peerView -o json: %s", doc)
	}
}

// TestConnectionWhy: info peer says, while the tunnel is not Connected,
// what the gateway says of why, and nothing of it once Connected.
func TestConnectionWhy(t *testing.T) {
	const why = "health pings through the tunnel go unanswered; this gateway sends to the server at 172.30.12.2:31820"
	c := &netv1beta1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "gw-peer"}}
	c.Status.Value = netv1beta1.ConnectionError
	c.Status.Conditions = []metav1.Condition{{Type: netv1beta1.ConditionReady, Status: metav1.ConditionFalse, Message: why}}
	p := PeerInfo{ClusterID: "peer", Connection: connectionInfo(c)}
	var b bytes.Buffer
	p.WriteSummary(&b)
	if flat := strings.Join(strings.Fields(b.String()), " "); !strings.Contains(flat, "Why: "+why) {
		t.Errorf("summary of a Connection in Error:\n%s", b.String())
	}
	doc, err := Encode(p, manifests.FormatJSON, "connection.message")
	if err != nil || !strings.Contains(string(doc), "172.30.12.2:31820") {
		t.Errorf("info peer --get connection.message -o json: %s (%v)", doc, err)
	}

	c.Status.Value = netv1beta1.Connected
	c.Status.Conditions[0].Status, c.Status.Conditions[0].Message = metav1.ConditionTrue, "health pings through the tunnel are answered"
	p.Connection = connectionInfo(c)
	b.Reset()
	p.WriteSummary(&b)
	if strings.Contains(b.String(), "Why:") {
		t.Errorf("summary of a Connected Connection:\n%s", b.String())
	}
}

// TestFollowedEndpoint checks that info peer says where a client follows
// its server, and what its GatewayClient names meanwhile, in the summary
// and under connection.followedEndpoint; and nothing while it follows none.
func TestFollowedEndpoint(t *testing.T) {
	c := &netv1beta1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "gw-peer", Annotations: map[string]string{
		netv1beta1.FollowedEndpointAnnotation: `{"addresses":["172.30.12.2"],"port":30398,"over":{"addresses":["172.30.12.2"],"port":30397}}`}}}
	c.Status.Value = netv1beta1.Connected
	p := PeerInfo{ClusterID: "peer", Connection: connectionInfo(c)}
	var b bytes.Buffer
	p.WriteSummary(&b)
	if flat := strings.Join(strings.Fields(b.String()), " "); !strings.Contains(flat, "Server moved to: 172.30.12.2 port 30398 (announced through the tunnel; the GatewayClient names 172.30.12.2 port 30397") {
		t.Errorf("summary of a client following its server:\n%s", b.String())
	}
	doc, err := Encode(p, manifests.FormatJSON, "connection.followedEndpoint.port")
	if err != nil || strings.TrimSpace(string(doc)) != "30398" {
		t.Errorf("info peer --get connection.followedEndpoint.port -o json: %s (%v)", doc, err)
	}

	c.Annotations = nil
	p.Connection = connectionInfo(c)
	b.Reset()
	p.WriteSummary(&b)
	if strings.Contains(b.String(), "moved") {
		t.Errorf("summary of a client following no announcement:\n%s", b.String())
	}
}
