package testbed

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sync"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// Forwarder splices TCP connections accepted on 127.0.0.1 inside a network
// namespace to an address of the host's namespace.
type Forwarder struct {
	// Addr is the listening address inside the namespace.
	Addr     string
	listener net.Listener
	wg       sync.WaitGroup
}

// Forward listens on 127.0.0.1 inside ns and forwards to target, an address
// of the current (host) namespace.
func Forward(ns *netns.NS, target string) (*Forwarder, error) {
	var l net.Listener
	err := ns.Do(func() error {
		var err error
		l, err = net.Listen("tcp4", "127.0.0.1:0")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen in %s: %w", ns.Name, err)
	}
	f := &Forwarder{Addr: l.Addr().String(), listener: l}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				splice(in, target)
			}()
		}
	}()
	return f, nil
}

func splice(in net.Conn, target string) {
	defer in.Close()
	out, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer out.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done
}

// Close stops accepting; connections in flight end with their peers.
func (f *Forwarder) Close() error {
	return f.listener.Close()
}

// Kubeconfig writes to path a copy of the kubeconfig at src whose clusters
// point at the forwarder.
func (f *Forwarder) Kubeconfig(src, path string) error {
	cfg, err := clientcmd.LoadFromFile(src)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", src, err)
	}
	if len(cfg.Clusters) == 0 {
		return errors.New("kubeconfig " + src + " has no cluster")
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + f.Addr
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}

// APIServerAddress returns host:port of the first cluster of a kubeconfig.
func APIServerAddress(kubeconfig string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return "", fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	for _, c := range cfg.Clusters {
		if u, err := url.Parse(c.Server); err == nil && u.Host != "" {
			return u.Host, nil
		}
	}
	return "", errors.New("kubeconfig " + kubeconfig + " names no server")
}
