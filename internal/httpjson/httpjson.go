package httpjson

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// Get sends a GET for url with c and decodes the answer's body, of which it
// reads at most limit bytes, into a T. An answer other than 200 OK is an
// error.
func Get[T any](ctx context.Context, c *http.Client, url string, limit int64) (T, error) {
	var v T
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return v, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, limit)).Decode(&v); err != nil {
		return v, fmt.Errorf("GET %s: not the answer expected: %w", url, err)
	}
	return v, nil
}
