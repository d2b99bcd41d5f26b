package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// A program started in a namespace runs there, in the caller's mounts, or
// in mounts of its own as a pod.
func TestNetns(t *testing.T) {
	netns.RequirePrivileged(t)
	ns := netns.New(t, "proc")
	want, err := netns.Inode(netns.Path(ns.Name))
	if err != nil {
		t.Fatal(err)
	}
	hostMnt, err := netns.Inode("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range []bool{false, true} {
		p, err := Start(Spec{Name: "sleep", Argv: []string{"sleep", "30"}, Netns: ns.Name, Pod: pod, Log: filepath.Join(t.TempDir(), "sleep.log")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Kill)
		// The pid is the program's once nsenter or the shell has exec'd it.
		deadline := time.Now().Add(10 * time.Second)
		for {
			exe, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(p.Pid), "exe"))
			if filepath.Base(exe) == "sleep" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod %v: process %d runs %s, not sleep", pod, p.Pid, exe)
			}
			time.Sleep(20 * time.Millisecond)
		}
		got, err := netns.Inode(filepath.Join("/proc", strconv.Itoa(p.Pid), "ns", "net"))
		if err != nil || got != want {
			t.Errorf("pod %v: network namespace %d (%v), want %d", pod, got, err, want)
		}
		mnt, err := netns.Inode(filepath.Join("/proc", strconv.Itoa(p.Pid), "ns", "mnt"))
		if err != nil || (mnt == hostMnt) == pod {
			t.Errorf("pod %v: mount namespace %d (%v), the host's is %d", pod, mnt, err, hostMnt)
		}
	}
}
