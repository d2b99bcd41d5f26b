// Package resync holds the loop machinery the two dataplane agents share:
// a trigger that folds any number of requests for a sync into one; watches
// that pull it when API objects or the kernel's links and routes change,
// and a ticker that pulls it every resync interval; the error a sync returns
// while a fact it needs is missing; and the record of the last sync that the
// readiness check answers from and that keeps the logs to one line per new
// reason.
//
// What a sync does is the agents' own; this package only decides when one
// runs and how its outcome is told.
package resync
