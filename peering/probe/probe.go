package probe

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/peerlink/peerlink/internal/httpjson"
)

// Answer is what the server answers to every request.
type Answer struct {
	// Pod names the answering pod.
	Pod string `json:"pod"`
	// Client is the caller's address as the server sees it.
	Client string `json:"client"`
}

// maxAnswer bounds what the client reads of an answer: a target is an
// address in another cluster, whatever answers there is not trusted.
const maxAnswer = 4 << 10

// Serve answers every HTTP request on addr with an Answer naming pod,
// until ctx ends.
func Serve(ctx context.Context, addr, pod string) error {
	srv := &http.Server{
		Addr:              addr,
		ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(Answer{Pod: pod, Client: r.RemoteAddr})
		}),
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve on %s: %w", addr, err)
	}
	return nil
}

// Target is one thing Check asks: a name for the report and a URL.
type Target struct {
	Name string
	URL  string
}

// ParseTarget reads a target written name=url.
func ParseTarget(s string) (Target, error) {
	name, url, ok := strings.Cut(s, "=")
	if !ok || name == "" || !strings.HasPrefix(url, "http://") {
		return Target{}, fmt.Errorf("target %q: want name=http://host:port/", s)
	}
	return Target{Name: name, URL: url}, nil
}

// Result is what Check found of one target.
type Result struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	OK   bool   `json:"ok"`
	// Answer is the last answer, when one came.
	Answer *Answer `json:"answer,omitempty"`
	// Attempts is how many requests were sent.
	Attempts int `json:"attempts"`
	// Error says why the last request failed.
	Error string `json:"error,omitempty"`
	// Seconds is how long the successful request took.
	Seconds float64 `json:"seconds,omitempty"`
}

// Check asks each target until one request succeeds or the attempts run
// out, a second apart, each request bounded by timeout, and writes one
// Result per target to out as a JSON line.
func Check(ctx context.Context, out io.Writer, targets []Target, attempts int, timeout time.Duration) error {
	client := &http.Client{
		Timeout: timeout,
		// Each request on a connection of its own: a retry must not ride
		// a connection the last attempt opened through another path.
		Transport: &http.Transport{DisableKeepAlives: true, DialContext: (&net.Dialer{Timeout: timeout}).DialContext},
	}
	enc := json.NewEncoder(out)
	for _, t := range targets {
		r := Result{Name: t.Name, URL: t.URL}
		for r.Attempts < attempts && ctx.Err() == nil {
			if r.Attempts > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
			r.Attempts++
			start := time.Now()
			a, err := httpjson.Get[Answer](ctx, client, t.URL, maxAnswer)
			if err != nil {
				r.Error = err.Error()
				continue
			}
			r.OK, r.Answer, r.Error, r.Seconds = true, &a, "", time.Since(start).Seconds()
			break
		}
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// ReadResults reads the JSON lines Check wrote, at most max of them; a
// line that is not a Result is an error.
func ReadResults(r io.Reader, max int) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if len(out) == max {
			return out, fmt.Errorf("more than %d results", max)
		}
		var res Result
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			return out, fmt.Errorf("not a probe result: %.200q", line)
		}
		out = append(out, res)
	}
	return out, sc.Err()
}
