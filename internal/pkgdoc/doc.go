// Package pkgdoc holds only a test: it enforces that every Go package of the
// module carries exactly one package doc comment, in its doc.go (or, for
// commands, main.go), so `go doc` says what each package owns.
package pkgdoc
