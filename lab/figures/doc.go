// Package figures is the shape of the lab's whole-system measurements, as
// `go run ./lab bench --json` prints them and `make bench` reads them back.
package figures
