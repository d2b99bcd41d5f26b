package v1beta1

import corev1 "k8s.io/api/core/v1"

// The CRDs default these fields on the API server (the +kubebuilder:default
// markers); the functions below apply the same defaults to objects that never
// met one, such as manifests read from a bundle. TestDefaultsMatchCRDs keeps
// the two in step.

// EffectiveMTU is the tunnel MTU a gateway whose spec.mtu is mtu runs with.
func EffectiveMTU(mtu int) int {
	if mtu == 0 {
		return DefaultMTU
	}
	return mtu
}

// Default fills the fields of s that the CRD defaults: mtu, endpoint.port
// and endpoint.serviceType.
func (s *GatewayServerSpec) Default() {
	s.MTU = EffectiveMTU(s.MTU)
	if s.Endpoint.Port == 0 {
		s.Endpoint.Port = DefaultGatewayPort
	}
	if s.Endpoint.ServiceType == "" {
		s.Endpoint.ServiceType = corev1.ServiceTypeClusterIP
	}
}

// Default fills the fields of s that the CRD defaults: mtu and
// endpoint.protocol.
func (s *GatewayClientSpec) Default() {
	s.MTU = EffectiveMTU(s.MTU)
	if s.Endpoint.Protocol == "" {
		s.Endpoint.Protocol = corev1.ProtocolUDP
	}
}
