package images

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/peerlink/peerlink/testkit/testenv/proc"
)

// Registry is the lab's image registry: the lab/registry binary, running in
// the background on a host address every cluster namespace routes to.
type Registry struct {
	// Binary is the built lab/registry program.
	Binary string
	// Addr is host:port to listen on.
	Addr string
	// Dir holds the blobs.
	Dir     string
	Log     string
	PidFile string
}

// Start starts the registry unless one already answers on Addr, and waits
// until it serves the registry API.
func (r Registry) Start(ctx context.Context) error {
	if r.ping(ctx) == nil {
		return nil
	}
	p, err := proc.Start(proc.Spec{
		Name:    "registry",
		Argv:    []string{r.Binary, "--addr=" + r.Addr, "--dir=" + r.Dir},
		Log:     r.Log,
		PidFile: r.PidFile,
		Detach:  true,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		err := r.ping(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.Exited:
			return fmt.Errorf("registry on %s: %w", r.Addr, p.Failure())
		case <-ctx.Done():
			return fmt.Errorf("registry on %s: not serving: %w", r.Addr, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (r Registry) ping(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.Addr+"/v2/", nil)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 2 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /v2/: %s", resp.Status)
	}
	return nil
}
