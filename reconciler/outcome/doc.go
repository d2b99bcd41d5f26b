// Package outcome is the skeleton every peerlink reconciler shares: the
// conclusion of one reconcile (Ready, Progressing, Stalled), the error only
// a change of the input repairs (Stall), the kstatus conditions that record
// the conclusion on the object, and the flow that reads an object, runs a
// reconciler's steps, records their outcome and writes the status only
// when it changed (Flow).
//
// It knows nothing of peerings, gateways or Services: the packages of each
// domain (configuration, gateway, services) build on it.
package outcome
