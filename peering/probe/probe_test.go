package probe

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

func TestServeAndCheck(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	go func() { _ = Serve(ctx, addr, "echo-a") }()

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close()

	var out bytes.Buffer
	targets := []Target{{Name: "up", URL: "http://" + addr + "/"}, {Name: "down", URL: "http://" + refused + "/"}}
	// The server may take a moment to listen: the first target retries.
	if err := Check(ctx, &out, targets, 3, time.Second); err != nil {
		t.Fatal(err)
	}
	res, err := ReadResults(&out, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Fatalf("results %+v, want two", res)
	}
	if up := res[0]; !up.OK || up.Answer == nil || up.Answer.Pod != "echo-a" || !strings.HasPrefix(up.Answer.Client, "127.0.0.1:") {
		t.Errorf("up: %+v, want an answer of echo-a seeing 127.0.0.1", up)
	}
	if down := res[1]; down.OK || down.Attempts != 3 || !strings.Contains(down.Error, "refused") {
		t.Errorf("down: %+v, want three refused attempts", down)
	}
}

func TestParseTarget(t *testing.T) {
	if got, err := ParseTarget("pod-to-pod=http://10.0.0.1:8090/"); err != nil || got.Name != "pod-to-pod" || got.URL != "http://10.0.0.1:8090/" {
		t.Errorf("ParseTarget = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "x", "=http://a/", "x=ftp://a/"} {
		if _, err := ParseTarget(bad); err == nil {
			t.Errorf("ParseTarget(%q) = nil error", bad)
		}
	}
}

func TestReadResultsBounded(t *testing.T) {
	in := strings.Repeat(`{"name":"a","ok":true}`+"\n", 3)
	if _, err := ReadResults(strings.NewReader(in), 2); err == nil {
		t.Error("three results read with a maximum of two")
	}
	if _, err := ReadResults(strings.NewReader("garbage\n"), 2); err == nil {
		t.Error("garbage read as a result")
	}
}
