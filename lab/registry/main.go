// Command registry is the lab's image registry: an OCI distribution server
// keeping blobs on disk and manifests in memory. The lab starts it in the
// background and pushes its images again whenever it restarts.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5000", "host:port to listen on")
	dir := flag.String("dir", "", "directory of the blobs (required)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "registry: --dir is required")
		os.Exit(2)
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
	handler := registry.New(
		registry.WithBlobHandler(registry.NewDiskBlobHandler(*dir)),
		registry.Logger(log.New(os.Stderr, "", log.LstdFlags)),
	)
	err := http.ListenAndServe(*addr, handler)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
}
