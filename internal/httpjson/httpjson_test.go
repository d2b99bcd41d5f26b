package httpjson

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type answer struct {
	Pod string `json:"pod"`
}

func TestGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte(`{"pod":"echo-1"}`))
		case "/large":
			w.Write([]byte(`{"pod":"` + strings.Repeat("x", 1<<20) + `"}`))
		case "/text":
			w.Write([]byte("hello"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	got, err := Get[answer](ctx, srv.Client(), srv.URL+"/ok", 4<<10)
	if err != nil || got.Pod != "echo-1" {
		t.Errorf("/ok: %+v, %v; want pod echo-1", got, err)
	}
	for path, want := range map[string]string{
		"/large":   "unexpected EOF", // cut at the bound
		"/text":    "not the answer expected",
		"/missing": "404 Not Found",
	} {
		if _, err := Get[answer](ctx, srv.Client(), srv.URL+path, 4<<10); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", path, err, want)
		}
	}
}
