// Command printversion prints the version.Info of its own build as JSON,
// for the test of the linker stamp.
package main

import (
	"encoding/json"
	"os"

	"github.com/peerlink/peerlink/internal/version"
)

func main() {
	if err := json.NewEncoder(os.Stdout).Encode(version.Get()); err != nil {
		panic(err)
	}
}
