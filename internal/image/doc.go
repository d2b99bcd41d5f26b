// Package image builds peerlink's container images without a container
// engine, with go-containerregistry: it cross-compiles the agent for each
// platform with the version stamped in, wraps each binary in a one-layer
// OCI image, gathers the images in an index, and writes the index as an OCI
// image layout or pushes it to a registry. `make images` and `make push`
// (hack/images) and the lab use it alike.
//
// It owns how an image of one program is made (Of), which the lab also
// uses for the images of its own programs. It does not run a registry, nor
// say which images the install bundle uses (bundles/install does).
package image
