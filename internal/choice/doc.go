// Package choice parses a value that must be one of a few names: an
// output format, a service type, a flag's mode.
package choice
