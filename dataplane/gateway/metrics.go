package gateway

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/dataplane/health"
	"github.com/peerlink/peerlink/dataplane/wireguard"
	"github.com/peerlink/peerlink/mcs"
	"github.com/peerlink/peerlink/mcs/exchange"
)

// metrics are the gateway's Prometheus metrics. Byte counts and handshake
// age come from the last WireGuard device snapshot the agent took.
type metrics struct {
	latency prometheus.Histogram

	mu             sync.Mutex
	implementation wireguard.Implementation
	peer           *wgtypes.Peer
	now            func() time.Time

	// dropped holds the ingress filter's drops by reason since the agent
	// started; kernel holds the kernel counters last read, which restart
	// from zero whenever the table is written anew.
	dropped map[string]float64
	kernel  map[string]uint64
	// state is the tunnel's health as last reported, empty before the
	// first report.
	state health.State
	// measuredPathMTU is the last path MTU measured, 0 before the first.
	measuredPathMTU int
	// announcedMTU and peerMTU are the MTUs this side and the peer
	// announce through the tunnel; 0 while unknown.
	announcedMTU, peerMTU int
	// refused counts the service exchange's connections refused, by
	// reason; rejected is how many services of the peer's last set were
	// rejected.
	refused  map[string]float64
	rejected int
	// rejectedServices counts the services of the peer's sets rejected,
	// by rule, once each time one is newly rejected.
	rejectedServices map[string]float64
	// switches counts the switches to the next key, by result.
	switches map[string]float64
	// ignored holds the health prober's ignored packets by reason, as
	// it counts them since it started (once per agent).
	ignored map[string]uint64

	stateDesc, received, transmitted, handshakeAge, impl, drops, pathMTU, peerMTUDesc, mtuMismatchDesc, refusedDesc, rejectedDesc, rejectedServicesDesc, switchesDesc, ignoredDesc *prometheus.Desc
}

func newMetrics(now func() time.Time) *metrics {
	return &metrics{
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "peerlink_gateway_latency_seconds",
			Help:    "Round-trip time of the health pings through the tunnel.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		now:              now,
		dropped:          map[string]float64{},
		kernel:           map[string]uint64{},
		refused:          map[string]float64{},
		rejectedServices: map[string]float64{},
		switches:         map[string]float64{},
		ignoredDesc: prometheus.NewDesc("peerlink_gateway_health_ignored_packets_total",
			"Packets the health prober ignored, by reason: sender (not from the peer's tunnel address and port), malformed (not a packet "+
				"of the protocol, or an announcement outside its bounds), stale (an answer to no question waiting for one), leaving (a ping "+
				"after this side said goodbye).",
			[]string{"reason"}, nil),
		stateDesc: prometheus.NewDesc("peerlink_gateway_connection_state",
			"The tunnel's health, as the Connection's status.value says it: 1 for the state in the label (Connecting, Connected, Error), "+
				"0 for the others; absent before the first health report.",
			[]string{"state"}, nil),
		switchesDesc: prometheus.NewDesc("peerlink_gateway_key_switches_total",
			"Switches of the tunnel to the gateway's next key (key rotation), by result: done (a handshake with the next key succeeded), "+
				"reverted (none did in time: the tunnel went back to the current key).",
			[]string{"result"}, nil),
		refusedDesc: prometheus.NewDesc("peerlink_gateway_service_exchange_refused_total",
			"Connections of the service exchange (TCP 12346) ended or refused for what came in, by reason: stranger (not from the peer's tunnel address), "+
				"too-large (a frame over 1 MiB, or a set over the limits), malformed (not the protocol), too-often (the peer reconnecting "+
				"faster than once a second after ten in a row). Nothing of what such a connection "+
				"brought since its last complete batch is applied.",
			[]string{"reason"}, nil),
		rejectedDesc: prometheus.NewDesc("peerlink_gateway_service_exchange_rejected_services",
			"Services of the set the peer sends last that were rejected (invalid, or past a limit).", nil, nil),
		rejectedServicesDesc: prometheus.NewDesc("peerlink_gateway_service_exchange_refused_services_total",
			"Services of the peer's set rejected, by the rule they broke (invalid, duplicate, endpoints, endpoint-groups, metadata-bytes, "+
				"services, total-endpoints, total-endpoint-groups, total-metadata-bytes, document-bytes, encoded-bytes), counted when a "+
				"service is first rejected, or rejected for another reason: the same rejection in the peer's next set is not counted again.",
			[]string{"reason"}, nil),
		drops: prometheus.NewDesc("peerlink_gateway_ingress_dropped_packets_total",
			"Packets from the tunnel the ingress filter dropped, by reason: source (not from the peer's declared ranges), "+
				"gateway (for the gateway pod itself), destination (not to this cluster's pod or external ranges).",
			[]string{"reason"}, nil),
		received: prometheus.NewDesc("peerlink_gateway_received_bytes_total",
			"Bytes received from the peer through the tunnel, as WireGuard counts them.", nil, nil),
		transmitted: prometheus.NewDesc("peerlink_gateway_transmitted_bytes_total",
			"Bytes sent to the peer through the tunnel, as WireGuard counts them.", nil, nil),
		handshakeAge: prometheus.NewDesc("peerlink_gateway_last_handshake_seconds",
			"Seconds since the last WireGuard handshake with the peer; absent before the first.", nil, nil),
		pathMTU: prometheus.NewDesc("peerlink_gateway_path_mtu_bytes",
			"The largest packet the health probes saw cross the tunnel, at most the tunnel's MTU; absent before the first measurement.", nil, nil),
		peerMTUDesc: prometheus.NewDesc("peerlink_gateway_peer_mtu_bytes",
			"The tunnel MTU the peer's gateway announces through the tunnel; absent while unknown (not heard yet, or a peer of an earlier release).", nil, nil),
		mtuMismatchDesc: prometheus.NewDesc("peerlink_gateway_mtu_mismatch",
			"1 when the peer's gateway announces a tunnel MTU other than this gateway's, 0 when the same (both sides must have the same MTU); "+
				"absent while the peer's is unknown.", nil, nil),
		impl: prometheus.NewDesc("peerlink_gateway_wireguard_implementation",
			"The WireGuard back-end in use (1 for the one in the label).", []string{"implementation"}, nil),
	}
}

// observe records a device snapshot.
func (m *metrics) observe(impl wireguard.Implementation, peer *wgtypes.Peer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.implementation = impl
	m.peer = peer
}

// observeState records the tunnel's health.
func (m *metrics) observeState(s health.State) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state = s
}

// observePathMTU records a path MTU measurement.
func (m *metrics) observePathMTU(v int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.measuredPathMTU = v
}

// observeMTUs records the MTUs this side and the peer announce.
func (m *metrics) observeMTUs(announced, peer int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.announcedMTU, m.peerMTU = announced, peer
}

// count adds one to the counter of key in counts, one of the metrics'
// maps of counters.
func (m *metrics) count(counts map[string]float64, key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	counts[key]++
}

// observeIgnored records the health prober's counts of ignored packets.
func (m *metrics) observeIgnored(counts map[string]uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ignored = counts
}

// observeRefused counts a connection of the service exchange refused.
func (m *metrics) observeRefused(reason string) {
	m.count(m.refused, reason)
}

// observeRejected records how many services of the peer's set were
// rejected.
func (m *metrics) observeRejected(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rejected = n
}

// observeRejectedService counts a service of the peer's set newly
// rejected for rule.
func (m *metrics) observeRejectedService(rule string) {
	m.count(m.rejectedServices, rule)
}

// observeKeySwitch counts a switch to the next key ending with result.
func (m *metrics) observeKeySwitch(result string) {
	m.count(m.switches, result)
}

// observeDrops records a reading of the ingress filter's kernel counters.
// A counter lower than at the last reading was written anew with its
// table: all of it is new.
func (m *metrics) observeDrops(kernel map[string]uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, reason := range dataplane.IngressDropReasons() {
		k := kernel[reason]
		if last := m.kernel[reason]; k >= last {
			m.dropped[reason] += float64(k - last)
		} else {
			m.dropped[reason] += float64(k)
		}
		m.kernel[reason] = k
	}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	m.latency.Describe(ch)
	ch <- m.stateDesc
	ch <- m.received
	ch <- m.transmitted
	ch <- m.handshakeAge
	ch <- m.impl
	ch <- m.drops
	ch <- m.pathMTU
	ch <- m.peerMTUDesc
	ch <- m.mtuMismatchDesc
	ch <- m.refusedDesc
	ch <- m.rejectedDesc
	ch <- m.rejectedServicesDesc
	ch <- m.switchesDesc
	ch <- m.ignoredDesc
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.latency.Collect(ch)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != "" {
		for _, s := range []health.State{health.Connecting, health.Connected, health.Error} {
			v := 0.0
			if s == m.state {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(m.stateDesc, prometheus.GaugeValue, v, string(s))
		}
	}
	if m.implementation != "" {
		ch <- prometheus.MustNewConstMetric(m.impl, prometheus.GaugeValue, 1, string(m.implementation))
	}
	if m.measuredPathMTU > 0 {
		ch <- prometheus.MustNewConstMetric(m.pathMTU, prometheus.GaugeValue, float64(m.measuredPathMTU))
	}
	if m.peerMTU > 0 {
		ch <- prometheus.MustNewConstMetric(m.peerMTUDesc, prometheus.GaugeValue, float64(m.peerMTU))
		if m.announcedMTU > 0 {
			mismatch := 0.0
			if m.peerMTU != m.announcedMTU {
				mismatch = 1
			}
			ch <- prometheus.MustNewConstMetric(m.mtuMismatchDesc, prometheus.GaugeValue, mismatch)
		}
	}
	for _, reason := range dataplane.IngressDropReasons() {
		ch <- prometheus.MustNewConstMetric(m.drops, prometheus.CounterValue, m.dropped[reason], reason)
	}
	for _, reason := range exchange.RefusedReasons() {
		ch <- prometheus.MustNewConstMetric(m.refusedDesc, prometheus.CounterValue, m.refused[reason], reason)
	}
	ch <- prometheus.MustNewConstMetric(m.rejectedDesc, prometheus.GaugeValue, float64(m.rejected))
	for _, rule := range mcs.Rules() {
		ch <- prometheus.MustNewConstMetric(m.rejectedServicesDesc, prometheus.CounterValue, m.rejectedServices[rule], rule)
	}
	for _, result := range []string{switchDone, switchReverted} {
		ch <- prometheus.MustNewConstMetric(m.switchesDesc, prometheus.CounterValue, m.switches[result], result)
	}
	for _, reason := range health.IgnoredReasons() {
		ch <- prometheus.MustNewConstMetric(m.ignoredDesc, prometheus.CounterValue, float64(m.ignored[reason]), reason)
	}
	if m.peer == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(m.received, prometheus.CounterValue, float64(m.peer.ReceiveBytes))
	ch <- prometheus.MustNewConstMetric(m.transmitted, prometheus.CounterValue, float64(m.peer.TransmitBytes))
	if !m.peer.LastHandshakeTime.IsZero() {
		ch <- prometheus.MustNewConstMetric(m.handshakeAge, prometheus.GaugeValue, m.now().Sub(m.peer.LastHandshakeTime).Seconds())
	}
}
