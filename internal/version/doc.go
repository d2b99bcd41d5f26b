// Package version tells which build of peerlink is running: the version,
// commit and tree state a build stamped into the binary (with the linker
// flags LDFlags gives), else what the Go toolchain recorded, and the Go
// version and platform. The CLI and the agent print it, the controller
// publishes its own in the cluster-info ConfigMap, and the CLI compares the
// two and reports both (Report).
//
// It does not run git or the Go toolchain: the image build (package image)
// finds the stamp and passes LDFlags to go build.
package version
